package workload

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/kvd-project/kvd/internal/errs"
)

// ErrConfig is wrapped by every error Validate and the parsers return.
var ErrConfig = errs.ErrConfig

// Op is one kind of operation.
type Op uint8

const (
	// Get reads a key.
	Get Op = iota
	// Put writes a key with a value of the configured size.
	Put
	// CAS reads a key's version and writes it back conditionally on that
	// version (a read-modify-write): under contention some fail with a
	// conflict.
	CAS
	// Scan reads a short range: up to Generator.ScanLen keys in key order
	// from a drawn key (YCSB-E).
	Scan
)

func (o Op) String() string {
	switch o {
	case Put:
		return "put"
	case CAS:
		return "cas"
	case Scan:
		return "scan"
	}
	return "get"
}

// Dist is how keys are drawn from the key space.
type Dist uint8

const (
	// Uniform: every key equally likely.
	Uniform Dist = iota
	// Zipf: key ranks follow a Zipf law with exponent Config.ZipfS; the hot
	// ranks are scattered over the key space (and so over the table's
	// buckets) rather than being keys 0, 1, 2...
	Zipf
)

func (d Dist) String() string {
	if d == Zipf {
		return "zipf"
	}
	return "uniform"
}

// ParseDist maps a flag value onto a Dist.
func ParseDist(s string) (Dist, error) {
	switch strings.ToLower(s) {
	case "uniform", "":
		return Uniform, nil
	case "zipf", "zipfian":
		return Zipf, nil
	}
	return 0, fmt.Errorf("%w: unknown key distribution %q (want uniform or zipf)", ErrConfig, s)
}

// Mix is the share of GETs among operations, in percent; the rest are PUTs.
type Mix int

// The YCSB-style mixes kvbench sweeps by default.
const (
	ReadOnly  Mix = 100 // YCSB C
	ReadMost  Mix = 95  // YCSB B
	ReadHalf  Mix = 50  // YCSB A
	WriteOnly Mix = 0   // every op a PUT
	// CASOnly: every op a compare-and-swap (CAS). Not a percentage.
	CASOnly Mix = -1
	// ScanInsert is YCSB-E: ScanPercent of operations short range scans
	// (Scan) from a drawn key, the rest inserts of new keys (Put of a key
	// past the preloaded ones). Not a percentage.
	ScanInsert Mix = -2
)

// ScanPercent is the share of scans in ScanInsert, as in YCSB-E.
const ScanPercent = 95

// String names the mix as "GET/PUT" percentages: "95/5", or "cas".
func (m Mix) String() string {
	switch m {
	case CASOnly:
		return "cas"
	case ScanInsert:
		return "scan"
	}
	return fmt.Sprintf("%d/%d", int(m), 100-int(m))
}

// ParseMix accepts "95/5" style percentages, a bare GET percentage ("95"),
// YCSB letters ("ycsb-a", "b", ...), "get" / "put" for 100/0 and 0/100, and
// "cas" for compare-and-swap only, and "scan" (or "ycsb-e", "e") for
// YCSB-E's short scans and inserts.
func ParseMix(s string) (Mix, error) {
	t := strings.TrimPrefix(strings.ToLower(strings.TrimSpace(s)), "ycsb-")
	switch t {
	case "get", "read", "c":
		return ReadOnly, nil
	case "b":
		return ReadMost, nil
	case "a":
		return ReadHalf, nil
	case "put", "write":
		return WriteOnly, nil
	case "cas":
		return CASOnly, nil
	case "scan", "e":
		return ScanInsert, nil
	}
	r, w, split := strings.Cut(t, "/")
	rp, err := strconv.Atoi(r)
	if err != nil || rp < 0 || rp > 100 {
		return 0, fmt.Errorf("%w: bad mix %q (want e.g. 95/5, 100, ycsb-a, get, put)", ErrConfig, s)
	}
	if split {
		wp, err := strconv.Atoi(w)
		if err != nil || rp+wp != 100 {
			return 0, fmt.Errorf("%w: mix %q does not add up to 100", ErrConfig, s)
		}
	}
	return Mix(rp), nil
}

// Config describes a workload.
type Config struct {
	// Mix is the GET share in percent, or CASOnly or ScanInsert. The zero
	// value is WriteOnly.
	Mix Mix
	// Keys is the size of the key space. Default 10000.
	Keys int
	// KeySize is every key's length in bytes. Default 16; it must fit "k"
	// plus the decimal digits of Keys-1.
	KeySize int
	// ValueSize is every PUT's value length in bytes. Default 256 (etcd's
	// benchmark value size).
	ValueSize int
	// Dist picks keys. Default Uniform.
	Dist Dist
	// ZipfS is the Zipf exponent, > 1 (math/rand/v2's Zipf needs s > 1).
	// Default 1.1.
	ZipfS float64
	// ScanLength is the longest scan of ScanInsert: each scan asks for a
	// length drawn uniformly from 1..ScanLength (YCSB-E's maxscanlength
	// and uniform scanlengthdistribution). Default 100.
	ScanLength int
}

// MaxScanLength bounds Config.ScanLength: one page of a range read
// (limits.MaxScanKeys), so a scan is one request.
const MaxScanLength = 1000

// Defaults.
const (
	DefaultKeys      = 10000
	DefaultKeySize   = 16
	DefaultValueSize = 256
	DefaultZipfS     = 1.1
	// DefaultScanLength is Config.ScanLength's default, YCSB-E's.
	DefaultScanLength = 100
)

// WithDefaults returns c with its zero fields set to their defaults
// (exported: bench.Point embeds a Config).
func (c Config) WithDefaults() Config {
	if c.Keys == 0 {
		c.Keys = DefaultKeys
	}
	if c.KeySize == 0 {
		c.KeySize = DefaultKeySize
	}
	if c.ValueSize == 0 {
		c.ValueSize = DefaultValueSize
	}
	if c.ZipfS == 0 {
		c.ZipfS = DefaultZipfS
	}
	if c.ScanLength == 0 {
		c.ScanLength = DefaultScanLength
	}
	return c
}

// Validate reports whether c is usable. Zero fields are checked as their
// defaults; c itself is not changed.
func (c Config) Validate() error {
	c = c.WithDefaults()
	switch {
	case (c.Mix < 0 || c.Mix > 100) && c.Mix != CASOnly && c.Mix != ScanInsert:
		return fmt.Errorf("%w: mix %d%% GETs is outside 0..100", ErrConfig, int(c.Mix))
	case c.Keys < 0:
		return fmt.Errorf("%w: %d keys", ErrConfig, c.Keys)
	case c.KeySize < 1+len(strconv.Itoa(c.Keys-1)):
		return fmt.Errorf("%w: %d-byte keys cannot name %d keys", ErrConfig, c.KeySize, c.Keys)
	case c.Mix == ScanInsert && c.KeySize < 1+len(strconv.Itoa(2*c.Keys-1)):
		// Inserts write keys Keys..2*Keys-1.
		return fmt.Errorf("%w: %d-byte keys cannot name the %d keys a scan mix inserts up to", ErrConfig, c.KeySize, 2*c.Keys)
	case c.ScanLength < 1 || c.ScanLength > MaxScanLength:
		return fmt.Errorf("%w: scan length %d outside 1..%d", ErrConfig, c.ScanLength, MaxScanLength)
	case c.ValueSize < 0:
		return fmt.Errorf("%w: value size %d", ErrConfig, c.ValueSize)
	case c.Dist > Zipf:
		return fmt.Errorf("%w: unknown distribution %d", ErrConfig, c.Dist)
	case c.Dist == Zipf && !(c.ZipfS > 1):
		return fmt.Errorf("%w: Zipf exponent %v must be > 1", ErrConfig, c.ZipfS)
	}
	return nil
}
