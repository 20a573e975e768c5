package client

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/kvd-project/kvd/internal/table"
	"github.com/kvd-project/kvd/transport"
)

// geometry is what a client needs to address a node's table region.
type geometry struct {
	region   transport.Descriptor
	nbuckets uint32
	maxAge   time.Duration // a GET older than this may have read reused bytes
	hdr      table.Header  // as read at connect; every read must match its geometry
}

func (g *geometry) inArea(s table.Slot) bool { return g.hdr.InArea(s) }

// loadGeometry reads the region's header and adopts the layout it
// describes. It runs at connect and again whenever a GET meets a header of
// another generation or geometry (a rebuild after a snapshot install, or a
// failed rebuild retried): the region, its rkey and the connection are the
// same, so re-reading 64 bytes replaces a teardown and redial. Adopting a
// header read at any moment is safe: every GET compares the headers it
// reads with the geometry it started from, and fails over to a retry if
// they differ.
func (n *node) loadGeometry(ctx context.Context) error {
	region := transport.Descriptor{Addr: n.hello.RegionAddr, Len: n.hello.RegionLen, Key: n.hello.RegionKey}
	var hdr [table.HeaderSize]byte
	if err := n.conn.Read(ctx, []transport.ReadOp{{Remote: region, Dst: hdr[:]}}); err != nil {
		return err
	}
	h, err := table.ParseHeader(hdr[:])
	if err != nil {
		return err
	}
	if h.RecordEnd > n.hello.RegionLen {
		return fmt.Errorf("table header claims %d bytes, the region has %d", h.RecordEnd, n.hello.RegionLen)
	}
	old := n.geo.Load()
	n.geo.Store(&geometry{
		region:   region,
		nbuckets: h.Buckets,
		hdr:      h,
		maxAge:   time.Duration(h.GraceMillis) * time.Millisecond / 2,
	})
	if old != nil && !old.hdr.SameGeometry(h) {
		n.cache.reset() // locations in the old layout name nothing now
	}
	return nil
}

// Reasons a one-sided attempt did not produce an answer. They never reach
// callers: the GET retries, and in the end asks by RPC.
var (
	errTorn       = errors.New("torn or reused read")
	errStale      = errors.New("record superseded during read")
	errUnstable   = errors.New("region changed between reads")
	errLease      = errors.New("no valid lease")
	errTooSlow    = errors.New("read outlived the reuse grace period")
	errGeometry   = errors.New("region was rebuilt")
	errCandidates = errors.New("too many fingerprint matches")
	errIncomplete = errors.New("region is missing keys")
)

// getScratch holds one GET's buffers; pooled so the steady-state GET path
// allocates only its result.
type getScratch struct {
	hdr1, hdr2 [table.HeaderSize]byte
	bk1, bk2   [2][table.BucketSize]byte
	cached     []byte
	recs       [transport.MaxBatch][]byte
	slots      [2 * table.SlotsPerBucket]table.Slot
	ops        [transport.MaxBatch]transport.ReadOp
}

var scratchPool = sync.Pool{New: func() any { return new(getScratch) }}

// grow returns b resliced to n bytes, reallocating only if it is too small.
func grow(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n, n+n/4)
	}
	return b[:n]
}

// readResult is the outcome of a successful one-sided GET.
type readResult struct {
	value      []byte // dst with the value appended
	version    uint64
	found      bool
	roundTrips int
	reads      int // READs the successful attempt posted, over all its round trips
	bytes      int // bytes those READs fetched
}

// readBytes is how many bytes a batch of READs fetches.
func readBytes(ops []transport.ReadOp) int {
	n := 0
	for i := range ops {
		n += len(ops[i].Dst)
	}
	return n
}

// getOneSided runs one attempt of the one-sided GET protocol (docs/layout.md).
// With a cached location, round trip 1 reads the header, the bucket that
// held the key's slot and the record it named; else (or if that fails)
// round trip 1 reads the header and both candidate buckets, and round trip
// 2 reads every record whose fingerprint matches, or, for a miss, the
// header and both buckets again.
//
// start is a clock reading taken before the attempt's first READ.
func (n *node) getOneSided(ctx context.Context, dst, key []byte, needLease bool, start mono, s *getScratch) (readResult, error) {
	loc, cached := n.cache.get(key)
	if !cached {
		return n.getUncached(ctx, dst, key, needLease, start, s)
	}
	spent, done, err := n.getCached(ctx, dst, key, loc, needLease, start, s)
	if done {
		return spent, err
	}
	n.cache.drop(key)
	// A fresh start: the cached round trip may have failed for being slow.
	res, err := n.getUncached(ctx, dst, key, needLease, monoNow(), s)
	res.roundTrips += spent.roundTrips
	res.reads += spent.reads
	res.bytes += spent.bytes
	return res, err
}

// getCached tries the key's cached location: one round trip of two READs,
// the header and the record the cached slot word names, no bucket. A record
// that reads live, intact and of this key is the key's current record at
// the moment it was read, because the writer never leaves a record live
// while no slot names it (docs/layout.md, "Writing" and "Reading"). done is
// false if the record does not prove that (dead, hidden, another key's,
// torn, or the location's space since reused by another key): then the
// caller reads the key as uncached, and res counts the round trip, READs
// and bytes this spent.
func (n *node) getCached(ctx context.Context, dst, key []byte, loc location, needLease bool, start mono, s *getScratch) (res readResult, done bool, err error) {
	g := n.geo.Load()
	cs := table.DecodeSlot(loc.word)
	if !g.inArea(cs) {
		return readResult{}, false, nil
	}
	s.cached = grow(s.cached, int(cs.Len))
	ops := append(s.ops[:0],
		transport.ReadOp{Remote: g.region, Offset: 0, Dst: s.hdr1[:]},
		transport.ReadOp{Remote: g.region, Offset: cs.Offset, Dst: s.cached})
	if err := n.conn.Read(ctx, ops); err != nil {
		return readResult{}, true, err
	}
	// The decision's clock reading, after the last READ: it serves both the
	// age check (a GET too slow to trust the record's bytes goes uncached
	// for a fresh start) and the lease check in judge.
	now := monoNow()
	res = readResult{roundTrips: 1, reads: len(ops), bytes: readBytes(ops)}
	hdr, err := checkHeader(g, s.hdr1[:])
	if err != nil {
		return readResult{}, true, err
	}
	val, ver, verr := table.VerifyRecord(s.cached, key, cs)
	if verr != nil || now.sub(start) >= g.maxAge {
		return res, false, nil
	}
	a := getAttempt{g: g, hdr: hdr, start: start, needLease: needLease, s: s}
	if err := n.judgeAt(&a, hdr.LeaseExpiry, now); err != nil {
		return readResult{}, true, err
	}
	res.value, res.version, res.found = append(dst, val...), ver, true
	return res, true, nil
}

// getUncached is the attempt without a cached location.
func (n *node) getUncached(ctx context.Context, dst, key []byte, needLease bool, start mono, s *getScratch) (readResult, error) {
	g := n.geo.Load()
	h := table.Hash(key)
	b1, b2 := table.Buckets(h, g.nbuckets)
	ops := append(s.ops[:0],
		transport.ReadOp{Remote: g.region, Offset: 0, Dst: s.hdr1[:]},
		transport.ReadOp{Remote: g.region, Offset: table.BucketOffset(b1), Dst: s.bk1[0][:]},
		transport.ReadOp{Remote: g.region, Offset: table.BucketOffset(b2), Dst: s.bk1[1][:]})
	if err := n.conn.Read(ctx, ops); err != nil {
		return readResult{}, err
	}
	reads, nbytes := len(ops), readBytes(ops)
	hdr, err := checkHeader(g, s.hdr1[:])
	if err != nil {
		return readResult{}, err
	}
	a := getAttempt{g: g, hdr: hdr, start: start, needLease: needLease, s: s}
	cands, nFirst := scanBuckets(&s.bk1, table.Fingerprint(h), s.slots[:0])

	// Round trip 2: if a slot's fingerprint matched, the records they name
	// (nothing else: a live record of the key, named by its slot when the
	// buckets were read, is the key's value at that moment; see
	// docs/layout.md, Reading); if none did, or every one was another
	// key's, the header and both buckets again, to prove the miss.
	rounds := 2
	if len(cands) > 0 {
		res, err := n.readCandidates(ctx, dst, key, cands, nFirst, &a)
		res.reads, res.bytes = reads+res.reads, nbytes+res.bytes
		if err != nil || res.found {
			return res, err
		}
		reads, nbytes, rounds = res.reads, res.bytes, 3
	}
	return n.proveMiss(ctx, b1, b2, &a, rounds, reads, nbytes)
}

// getAttempt is what the round trips of one GET attempt share.
type getAttempt struct {
	g         *geometry    // as the attempt started
	hdr       table.Header // as round trip 1 read it
	start     mono
	needLease bool
	s         *getScratch
}

// readCandidates READs the records of the slots whose fingerprint matched
// (cands[:nFirst] from the key's first bucket, the rest from its second)
// and returns the first that is key's. found is false (and err nil) if every
// one belongs to another key. reads and bytes count this round trip only.
func (n *node) readCandidates(ctx context.Context, dst, key []byte, cands []table.Slot, nFirst int, a *getAttempt) (readResult, error) {
	if len(cands) > transport.MaxBatch {
		return readResult{}, errCandidates
	}
	g, hdr, s := a.g, &a.hdr, a.s
	ops := s.ops[:0]
	for i, sl := range cands {
		if !hdr.InArea(sl) {
			return readResult{}, errTorn // a torn bucket read: never READ outside the record area
		}
		s.recs[i] = grow(s.recs[i], int(sl.Len))
		ops = append(ops, transport.ReadOp{Remote: g.region, Offset: sl.Offset, Dst: s.recs[i]})
	}
	if err := n.conn.Read(ctx, ops); err != nil {
		return readResult{}, err
	}
	res := readResult{roundTrips: 2, reads: len(ops), bytes: readBytes(ops)}
	if err := n.judge(a, hdr.LeaseExpiry); err != nil {
		return res, err
	}
	for i, sl := range cands {
		val, ver, err := table.VerifyRecord(s.recs[i], key, sl)
		switch {
		case err == nil:
			n.cache.put(key, location{word: sl.Word(), second: i >= nFirst})
			res.value, res.version, res.found = append(dst, val...), ver, true
			return res, nil
		case errors.Is(err, table.ErrKeyMismatch):
			continue // another key with the same fingerprint
		case errors.Is(err, table.ErrDead), errors.Is(err, table.ErrHidden):
			// Superseded, or one of a transaction's writes still being
			// applied (docs/layout.md, "Atomic groups"): read again.
			return res, errStale
		default:
			return res, fmt.Errorf("%w: %w", errTorn, err)
		}
	}
	return res, nil
}

// proveMiss reads the header and both buckets again and accepts the miss
// only if the buckets did not change since round trip 1 (so neither read
// can have been torn, and no move can have hidden the key: docs/layout.md,
// Placement), the region's state did not move and is complete.
func (n *node) proveMiss(ctx context.Context, b1, b2 uint32, a *getAttempt, rounds, reads, nbytes int) (readResult, error) {
	g, hdr, s := a.g, &a.hdr, a.s
	ops := append(s.ops[:0],
		transport.ReadOp{Remote: g.region, Offset: 0, Dst: s.hdr2[:]},
		transport.ReadOp{Remote: g.region, Offset: table.BucketOffset(b1), Dst: s.bk2[0][:]},
		transport.ReadOp{Remote: g.region, Offset: table.BucketOffset(b2), Dst: s.bk2[1][:]})
	if err := n.conn.Read(ctx, ops); err != nil {
		return readResult{}, err
	}
	// The region's state (all but the lease word) must not have moved
	// between the two header reads; the lease is judged on its own, at the
	// moment of the decision, which is after every READ of this GET.
	if !table.SameState(s.hdr1[:], s.hdr2[:]) {
		return readResult{}, errUnstable
	}
	if err := n.judge(a, max(hdr.LeaseExpiry, table.LeaseOf(s.hdr2[:]))); err != nil {
		return readResult{}, err
	}
	if s.bk1 != s.bk2 {
		return readResult{}, errUnstable
	}
	if hdr.Incomplete {
		return readResult{}, errIncomplete
	}
	return readResult{roundTrips: rounds, reads: reads + len(ops), bytes: nbytes + readBytes(ops)}, nil
}

// judge is the decision after a GET's last READ: the GET was quick enough
// that no record's bytes can have been reused under it, and (for a
// linearizable GET) the lease expiring at exp still holds by the client's
// bound on the node's clock.
func (n *node) judge(a *getAttempt, exp uint64) error {
	return n.judgeAt(a, exp, monoNow())
}

// judgeAt is judge with the decision's clock reading now, which must have
// been taken after the GET's last READ completed.
func (n *node) judgeAt(a *getAttempt, exp uint64, now mono) error {
	if now.sub(a.start) >= a.g.maxAge {
		return errTooSlow
	}
	if a.needLease {
		return n.clock.check(exp, now)
	}
	return nil
}

// checkHeader validates a header read against the geometry the GET started
// from: every field that addresses the region, not just the generation, so
// that a header that parses but describes another layout is never used.
func checkHeader(g *geometry, b []byte) (table.Header, error) {
	hdr, err := table.ParseHeader(b)
	if err != nil {
		return hdr, fmt.Errorf("%w: %w", errTorn, err)
	}
	if !hdr.SameGeometry(g.hdr) {
		return hdr, errGeometry
	}
	return hdr, nil
}

// scanBuckets appends every slot of both buckets whose fingerprint is fp,
// and reports how many came from the first.
func scanBuckets(bk *[2][table.BucketSize]byte, fp uint16, out []table.Slot) ([]table.Slot, int) {
	out = scanBucket(&bk[0], fp, out)
	n := len(out)
	return scanBucket(&bk[1], fp, out), n
}

// scanBucket appends every slot of the bucket whose fingerprint is fp.
func scanBucket(bk *[table.BucketSize]byte, fp uint16, out []table.Slot) []table.Slot {
	for i := 0; i < table.SlotsPerBucket; i++ {
		w := binary.LittleEndian.Uint64(bk[i*8:])
		if w == 0 {
			continue
		}
		if sl := table.DecodeSlot(w); sl.FP == fp {
			out = append(out, sl)
		}
	}
	return out
}
