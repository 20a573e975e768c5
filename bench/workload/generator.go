package workload

import (
	"math/rand/v2"
)

// scatter is a prime larger than any key space kvbench uses; multiplying a
// Zipf rank by it modulo the key count is a permutation, which spreads the
// hot keys over the space without a table.
const scatter = 2654435761

// Generator draws operations and keys for one goroutine. It is not safe for
// concurrent use: give each goroutine its own (New with distinct streams).
type Generator struct {
	cfg   Config
	rng   *rand.Rand
	zipf  *rand.Zipf
	key   []byte
	value []byte
}

// New returns a generator for cfg, which must have passed Validate. Streams
// with the same seed and stream number draw the same sequence.
func New(cfg Config, seed, stream uint64) *Generator {
	cfg = cfg.WithDefaults()
	g := &Generator{
		cfg:   cfg,
		rng:   rand.New(rand.NewPCG(seed, stream)),
		key:   make([]byte, cfg.KeySize),
		value: make([]byte, cfg.ValueSize),
	}
	if cfg.Dist == Zipf {
		g.zipf = rand.NewZipf(g.rng, cfg.ZipfS, 1, uint64(cfg.Keys-1))
	}
	for i := range g.value {
		// Printable and not all one byte, so values compress and look like data.
		g.value[i] = 'a' + byte((i*7+int(stream))%26)
	}
	return g
}

// Next draws the next operation and its key index.
func (g *Generator) Next() (Op, int) {
	op := Put
	switch {
	case g.cfg.Mix == CASOnly:
		op = CAS
	case g.cfg.Mix == ScanInsert:
		if g.rng.IntN(100) >= ScanPercent {
			return Put, g.InsertIndex()
		}
		op = Scan
	case g.rng.IntN(100) < int(g.cfg.Mix):
		op = Get
	}
	return op, g.Index()
}

// InsertIndex draws the key index of a ScanInsert insert: past the
// preloaded keys, in [Keys, 2*Keys), so inserts add keys the scans then
// meet (keys sort in index order). A repeat overwrites.
func (g *Generator) InsertIndex() int { return g.cfg.Keys + g.rng.IntN(g.cfg.Keys) }

// ScanLen draws a scan's length, uniform in 1..ScanLength.
func (g *Generator) ScanLen() int { return 1 + g.rng.IntN(g.cfg.ScanLength) }

// Index draws a key index in [0, Keys).
func (g *Generator) Index() int {
	if g.zipf == nil {
		return g.rng.IntN(g.cfg.Keys)
	}
	return int(g.zipf.Uint64() * scatter % uint64(g.cfg.Keys))
}

// Key returns key i's bytes: "k" and i in decimal, zero-padded to KeySize.
// The slice is the generator's and is overwritten by the next call.
func (g *Generator) Key(i int) []byte {
	return AppendKey(g.key[:0], i, g.cfg.KeySize)
}

// Value returns the value every PUT writes. Callers must not modify it.
func (g *Generator) Value() []byte { return g.value }

// AppendKey appends key i, size bytes long, to dst.
func AppendKey(dst []byte, i, size int) []byte {
	start := len(dst)
	for range size {
		dst = append(dst, '0')
	}
	dst[start] = 'k'
	for p := len(dst) - 1; i > 0 && p > start; p-- {
		dst[p] = byte('0' + i%10)
		i /= 10
	}
	return dst
}
