package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/kvd-project/kvd/internal/revision"
	"github.com/kvd-project/kvd/internal/table"
	"github.com/kvd-project/kvd/transport"
)

// geometry is what a client needs to address a node's table region.
type geometry struct {
	region      transport.Descriptor
	nbuckets    uint32
	bucketBytes int           // one bucket READ: its slot words and its arena
	maxAge      time.Duration // a GET older than this may have read reused bytes
	inlineAge   time.Duration // likewise for a GET that accepted arena bytes
	hdr         table.Header  // as read at connect; every read must match its geometry
	lease       *leaseCache   // the lease expiries read from headers of this geometry
}

func (g *geometry) inArea(s table.Slot) bool { return g.hdr.InArea(s) }

// loadGeometry reads the region's header and adopts the layout it
// describes. It runs at connect and again whenever a GET meets a header of
// another generation or geometry (a rebuild after a snapshot install, or a
// failed rebuild retried): the region, its rkey and the connection are the
// same, so re-reading the header replaces a teardown and redial. Adopting a
// header read at any moment is safe: every header a GET reads is compared
// with the geometry the GET started from (a retry if they differ), and a
// hit, which may read no header, does not depend on the generation. The
// lease expiry cached for the old geometry goes with it: the new one starts
// with this header's.
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
	g := &geometry{
		region:      region,
		nbuckets:    h.Buckets,
		bucketBytes: int(h.BucketBytes),
		hdr:         h,
		maxAge:      time.Duration(h.GraceMillis) * time.Millisecond / 2,
		inlineAge:   time.Duration(h.InlineGraceMillis) * time.Millisecond / 2,
		lease:       new(leaseCache),
	}
	g.lease.offerHeader(h)
	n.geo.Store(g)
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
	errLeaseLate  = errors.New("lease read too late to judge this read")
	errTooSlow    = errors.New("read outlived the reuse grace period")
	errGeometry   = errors.New("region was rebuilt")
	errCandidates = errors.New("too many fingerprint matches")
	errIncomplete = errors.New("region is missing keys")
)

// getScratch holds one GET's buffers; pooled so the steady-state GET path
// allocates only its result. Bucket buffers are as long as the geometry's
// buckets (fit).
type getScratch struct {
	hdr1, hdr2    [table.HeaderSize]byte
	bk1, bk2      [2][]byte // sized bytes each
	sized         int
	recs          [transport.MaxBatch][]byte
	slots, slots2 [2 * table.SlotsPerBucket]table.Slot
	scan1, scan2  keyScan
	ops           [transport.MaxBatch]transport.ReadOp
}

// fit sizes the bucket buffers for g, once per geometry the scratch
// meets: a GET on the same geometry finds them sized.
func (s *getScratch) fit(g *geometry) {
	if s.sized == g.bucketBytes {
		return
	}
	s.sized = g.bucketBytes
	for i := range 2 {
		s.bk1[i] = grow(s.bk1[i], g.bucketBytes)
		s.bk2[i] = grow(s.bk2[i], g.bucketBytes)
	}
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
	value      []byte        // dst with the value appended
	meta       revision.Meta // the key's, as its record carries it
	rev        uint64        // the store revision the answer is at (hitRevision)
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
// A linearizable attempt judges its lease by the expiry cached for the node
// (leasecache.go), and reads the header only when that is due. With a
// cached location, round trip 1 reads the bucket that held the key's inline
// record (its slot words and its arena up to that record), or the slot
// words of the bucket that held its out-of-place record; else (or
// if that fails) round trip 1 reads both candidate buckets, slot words and
// arenas, and answers a key whose record is inline there. Round trip 2
// reads the out-of-place records whose fingerprint matched, or, for a
// miss, the header and both buckets again.
//
// start is a clock reading taken before the attempt's first READ.
func (n *node) getOneSided(ctx context.Context, dst, key []byte, needLease bool, start mono, s *getScratch) (readResult, error) {
	a := n.newAttempt(needLease, start, s)
	loc, cached := n.cache.get(key)
	if !cached {
		return n.getUncached(ctx, dst, key, &a)
	}
	spent, done, err := n.getCached(ctx, dst, key, loc, &a)
	if done {
		return spent, err
	}
	n.cache.drop(key)
	// A fresh start: the cached round trip may have failed for being slow.
	a = n.newAttempt(needLease, n.clock.now(), s)
	res, err := n.getUncached(ctx, dst, key, &a)
	res.roundTrips += spent.roundTrips
	res.reads += spent.reads
	res.bytes += spent.bytes
	return res, err
}

// getAttempt is what the round trips of one GET attempt share.
//
// Which lease expiry may judge which answer (leasecache.go): exp, cached
// before the attempt's first READ was posted, any answer; r1, read in round
// trip 1, only an answer whose data a later round trip read (a hit's
// record); an expiry read in the same batch as the data, or later, none,
// since READs of one batch may run in any order. seen is the latest expiry
// the attempt read at all: if only it would pass, the attempt fails with
// errLeaseLate and the next one, which starts from the cache it refreshed,
// is judged by it.
type getAttempt struct {
	g          *geometry // as the attempt started
	exp        uint64    // cached before the first READ
	r1         uint64    // round trip 1's header (0: not read)
	rev0       uint64    // the header revision cached before the first READ
	rev1       uint64    // round trip 1's header's (0: not read)
	seen       uint64    // the latest read by the attempt
	readHeader bool      // round trip 1 reads the header, for its lease
	arena      bool      // the answer rests on arena bytes: the age limit is the inline grace's
	start      mono
	needLease  bool
	s          *getScratch
}

// newAttempt starts an attempt at start: for a linearizable one, the
// cached lease expiry, taken now, before any READ is posted.
func (n *node) newAttempt(needLease bool, start mono, s *getScratch) getAttempt {
	a := getAttempt{g: n.geo.Load(), start: start, needLease: needLease, s: s}
	a.rev0 = a.g.lease.rev.Load()
	if needLease {
		a.exp, a.readHeader = n.leaseDue(a.g, start)
	}
	if s != nil {
		s.fit(a.g)
	}
	return a
}

// maxAge is how old the attempt may be at its decision: less than half the
// grace period of the bytes its answer rests on, so that none of them can
// have been reused under it (rule R: arena bytes after Gi, others after G).
func (a *getAttempt) maxAge() time.Duration {
	if a.arena {
		return min(a.g.inlineAge, a.g.maxAge)
	}
	return a.g.maxAge
}

// firstOps begins round trip 1's batch in ops: with the header (into
// hdr), if the attempt reads it. Its place in the batch means nothing:
// READs of a batch may run in any order.
func (a *getAttempt) firstOps(ops []transport.ReadOp, hdr []byte) []transport.ReadOp {
	if a.readHeader {
		ops = append(ops, transport.ReadOp{Remote: a.g.region, Dst: hdr})
	}
	return ops
}

// bucketOps appends the READs of the key's two buckets (slot words and
// arena) into bk.
func (g *geometry) bucketOps(ops []transport.ReadOp, b1, b2 uint32, bk *[2][]byte) []transport.ReadOp {
	return append(ops,
		transport.ReadOp{Remote: g.region, Offset: g.hdr.BucketOffset(b1), Dst: bk[0]},
		transport.ReadOp{Remote: g.region, Offset: g.hdr.BucketOffset(b2), Dst: bk[1]})
}

// takeHeader checks the header round trip 1 read, if it read one, and
// takes its lease (as r1: see getAttempt).
func (a *getAttempt) takeHeader(b []byte) error {
	if !a.readHeader {
		return nil
	}
	hdr, err := checkHeader(a.g, b)
	if err != nil {
		return err
	}
	a.r1, a.rev1 = hdr.LeaseExpiry, hdr.Revision
	a.saw(hdr)
	return nil
}

// hitRevision is the store revision a hit is answered at: rev, the
// largest revision read from the node's header before the READ that read
// the record, or the record's mod revision if larger. Why the value is
// the key's at that revision: the record read live at some moment t of the
// GET, so it was the key's current record then; the node's revision at t
// was at least rev (the header publishes it only after the records up to
// it are visible, and it was read before t) and at least meta.Mod, and the
// key had no write between meta.Mod and t. So the key held this value and
// metadata at every revision from meta.Mod to the one at t, max(rev,
// meta.Mod) included (docs/layout.md, "The revision word").
func hitRevision(rev uint64, meta revision.Meta) uint64 { return max(rev, meta.Mod) }

// saw records the lease expiry of a header the attempt read, and offers
// it and the header's revision to the cache for later attempts.
func (a *getAttempt) saw(h table.Header) {
	a.g.lease.offerHeader(h)
	a.seen = max(a.seen, h.LeaseExpiry)
}

// getCached tries the key's cached location (and the header, if the lease
// is due): for an inline record, the bucket that held its slot, slot words
// and arena together, one round trip; for an out-of-place one, that
// bucket's slot words, then the records its slots of the key's
// fingerprint name (readCachedRecords). Never the bytes at the cached
// offset alone: a value can hold a record's image, crc and all, and once
// the cached record's space is reused the image can sit there
// (docs/layout.md, "A cached location"). done is false if nothing read
// proves the key's value (the key gone from the bucket; its record dead,
// hidden, another key's or torn): then the caller reads the key as
// uncached, and res counts the round trips, READs and bytes this spent.
func (n *node) getCached(ctx context.Context, dst, key []byte, loc location, a *getAttempt) (res readResult, done bool, err error) {
	s := a.s
	op, ok := a.cachedOp(key, loc)
	if !ok {
		return readResult{}, false, nil
	}
	ops := append(a.firstOps(s.ops[:0], s.hdr1[:]), op)
	if err := n.conn.Read(ctx, ops); err != nil {
		return readResult{}, true, err
	}
	// The decision's clock reading, after the last READ: it serves both the
	// age check (a GET too slow to trust the record's bytes goes uncached
	// for a fresh start) and the lease check in judge.
	now := n.clock.now()
	res = readResult{roundTrips: 1, reads: len(ops), bytes: readBytes(ops)}
	if err := a.takeHeader(s.hdr1[:]); err != nil {
		return readResult{}, true, err
	}
	k, found := a.verifyCached(dst, key, loc)
	if !found && k.bad == nil && now.sub(a.start) < a.maxAge() {
		switch {
		case len(k.oop) > 0:
			return n.readCachedRecords(ctx, dst, key, k, loc.second, a, res)
		case k.far != 0:
			return n.readFar(ctx, dst, key, k, a, res)
		}
	}
	if !found || now.sub(a.start) >= a.maxAge() {
		return res, false, nil
	}
	if err := n.judgeAt(a, a.exp, now); err != nil { // the header, if any, was in the record's batch
		return readResult{}, true, err
	}
	n.cache.put(key, k.loc)
	// The header, if any, was in the record's batch: only the cached
	// revision counts.
	res.value, res.meta, res.rev, res.found = k.value, k.meta, hitRevision(a.rev0, k.meta), true
	return res, true, nil
}

// readFar is a cached GET's second round trip: its bucket READ (slot words
// and the arena up to the cached record) found the key's slot naming a
// record further on, as after an update that kept the key in its bucket.
// That word was read in this GET, so the record it names was written in
// full before, and its block is reused only InlineGrace after the word
// stops naming it: read now, within InlineGrace/2 of the GET's start, the
// block's every word carries the word's tag if it is that record's
// (docs/layout.md, "Inline records"), the argument of an out-of-place
// record read in round trip 2. It is judged as such a record is, by the
// lease read before it. done is false if it is not the key's live record:
// the caller reads the key uncached.
func (n *node) readFar(ctx context.Context, dst, key []byte, k *keyScan, a *getAttempt, res readResult) (readResult, bool, error) {
	g, s := a.g, a.s
	w, second := k.far, k.farSecond
	sl := table.DecodeInlineSlot(w)
	b1, b2 := table.Buckets(table.Hash(key), g.nbuckets)
	if second {
		b1 = b2
	}
	lo, hi := table.BucketSize+sl.Offset, table.BucketSize+sl.Offset+sl.Len
	ops := append(s.ops[:0], transport.ReadOp{Remote: g.region, Offset: g.hdr.BucketOffset(b1) + lo, Dst: s.bk1[0][lo:hi]})
	if err := n.conn.Read(ctx, ops); err != nil {
		return readResult{}, true, err
	}
	res.roundTrips++
	res.reads, res.bytes = res.reads+1, res.bytes+readBytes(ops)
	k.reset(key, g, dst, k.oop[:0])
	k.verify(s.bk1[0][table.BucketSize:hi], w, second)
	if !k.found {
		return res, false, nil
	}
	a.arena = true
	if err := n.judge(a, max(a.exp, a.r1)); err != nil {
		return readResult{}, true, err
	}
	n.cache.put(key, k.loc)
	res.value, res.meta, res.rev, res.found = k.value, k.meta, hitRevision(max(a.rev0, a.rev1), k.meta), true
	return res, true, nil
}

// readCachedRecords is the second round trip of a cached GET of an
// out-of-place record: the records that the slots of the key's
// fingerprint in the cached bucket, read in round trip 1, name; the
// argument of an uncached GET's round trip 2 (readCandidates). done is
// false if none is the key's live record (every one another key's, dead
// or torn): the caller reads the key uncached.
func (n *node) readCachedRecords(ctx context.Context, dst, key []byte, k *keyScan, second bool, a *getAttempt, res readResult) (readResult, bool, error) {
	nFirst := len(k.oop)
	if second {
		nFirst = 0
	}
	res2, err := n.readCandidates(ctx, dst, key, k.oop, nFirst, a)
	res2.roundTrips = max(res2.roundTrips, res.roundTrips) // 2, or 1 if it READ nothing (a torn slot)
	res2.reads, res2.bytes = res.reads+res2.reads, res.bytes+res2.bytes
	switch {
	case err == nil && res2.found:
		return res2, true, nil
	case err == nil, errors.Is(err, errStale), errors.Is(err, errTorn), errors.Is(err, errCandidates):
		return res2, false, nil
	}
	return readResult{}, true, err
}

// cachedOp is the READ of a cached GET's round trip 1: the bucket that
// held an inline record, or the slot words of the one that held an
// out-of-place record (into the scratch's first bucket buffer). ok is false
// if the word cannot name anything in this geometry.
func (a *getAttempt) cachedOp(key []byte, loc location) (op transport.ReadOp, ok bool) {
	g, s := a.g, a.s
	if table.IsInline(loc.word) {
		if g.bucketBytes <= table.BucketSize {
			return op, false // no arenas: no inline record
		}
		sl := table.DecodeInlineSlot(loc.word)
		if !sl.InArena(uint64(g.bucketBytes - table.BucketSize)) {
			return op, false
		}
		b1, b2 := table.Buckets(table.Hash(key), g.nbuckets)
		if loc.second {
			b1 = b2
		}
		// The bucket's slot words and its arena up to the cached record's
		// end: all a hit at the cached place needs, and far fewer bytes
		// than the whole arena (on Soft-RoCE under emulation every KiB
		// costs about half a READ's latency).
		n := table.BucketSize + sl.Offset + sl.Len
		return transport.ReadOp{Remote: g.region, Offset: g.hdr.BucketOffset(b1), Dst: s.bk1[0][:n]}, true
	}
	if !g.inArea(table.DecodeSlot(loc.word)) {
		return op, false
	}
	// The slot words of the bucket that held it, and no record: bytes at
	// a cached offset prove nothing until a slot read before them names
	// them (getCached).
	b1, b2 := table.Buckets(table.Hash(key), g.nbuckets)
	if loc.second {
		b1 = b2
	}
	return transport.ReadOp{Remote: g.region, Offset: g.hdr.BucketOffset(b1), Dst: s.bk1[0][:table.BucketSize]}, true
}

// verifyCached verifies what a cached GET read. The bucket of an inline
// record counts as half an uncached read: any slot of it with the key's
// fingerprint naming a live inline record of the key is a hit (an update
// that kept the key in its bucket costs nothing), and the location found
// replaces the cached one. An inline hit sets a.arena. For an out-of-place
// record it only collects the slots of the key's fingerprint (k.oop, or an
// inline one further on: k.far), whose records are read next: found is
// false.
func (a *getAttempt) verifyCached(dst, key []byte, loc location) (*keyScan, bool) {
	g, s := a.g, a.s
	k := &s.scan1
	k.reset(key, g, dst, s.slots[:0])
	if table.IsInline(loc.word) {
		sl := table.DecodeInlineSlot(loc.word)
		k.bucket(s.bk1[0][:table.BucketSize+sl.Offset+sl.Len], loc.second)
		a.arena = k.found
		return k, k.found
	}
	// Out of place: the slots of the key's fingerprint, whose records
	// getCached reads next (an inline one of the key is "far": readFar).
	k.bucket(s.bk1[0][:table.BucketSize], loc.second)
	return k, false
}

// getUncached is the attempt without a cached location.
func (n *node) getUncached(ctx context.Context, dst, key []byte, a *getAttempt) (readResult, error) {
	g, s := a.g, a.s
	h := table.Hash(key)
	b1, b2 := table.Buckets(h, g.nbuckets)
	ops := g.bucketOps(a.firstOps(s.ops[:0], s.hdr1[:]), b1, b2, &s.bk1)
	if err := n.conn.Read(ctx, ops); err != nil {
		return readResult{}, err
	}
	res := readResult{roundTrips: 1, reads: len(ops), bytes: readBytes(ops)}
	if err := a.takeHeader(s.hdr1[:]); err != nil {
		return readResult{}, err
	}
	k := &s.scan1
	k.reset(key, g, dst, s.slots[:0])
	k.buckets(&s.bk1)
	switch {
	case k.found:
		// An inline hit in round trip 1: the header in this same batch, if
		// any, cannot judge it (its READ may have run after the record's).
		return n.inlineHit(key, k, a, a.exp, a.rev0, res)
	case k.bad != nil:
		return readResult{}, k.bad
	}

	// Round trip 2: if out-of-place slots' fingerprint matched, the records
	// they name (nothing else: a live record of the key, named by its slot
	// when the buckets were read, is the key's value at that moment; see
	// docs/layout.md, Reading); if none did, or every one was another
	// key's, the header and both buckets again, to prove the miss.
	if len(k.oop) > 0 {
		res2, err := n.readCandidates(ctx, dst, key, k.oop, k.nFirst, a)
		res2.reads, res2.bytes = res.reads+res2.reads, res.bytes+res2.bytes
		if err != nil || res2.found {
			return res2, err
		}
		res = res2
	}
	res.roundTrips++
	// A miss that took inline records for another key's rests on arena
	// bytes.
	a.arena = k.inline
	return n.proveMiss(ctx, dst, key, b1, b2, k.oop, a, res)
}

// inlineHit accepts the live inline record k found, judged by the lease
// expiring at exp (one read before the record: see getAttempt) and by the
// inline grace period, whose bytes it rests on, and answered at revision
// rev or later (read before the record too: hitRevision). res counts the
// round trips and READs so far.
func (n *node) inlineHit(key []byte, k *keyScan, a *getAttempt, exp, rev uint64, res readResult) (readResult, error) {
	a.arena = true
	if err := n.judge(a, exp); err != nil {
		return readResult{}, err
	}
	n.cache.put(key, k.loc)
	res.value, res.meta, res.rev, res.found = k.value, k.meta, hitRevision(rev, k.meta), true
	return res, nil
}

// readCandidates READs the records of the out-of-place slots whose
// fingerprint matched (cands[:nFirst] from the key's first bucket, the rest
// from its second) and returns the first that is key's. found is false (and
// err nil) if every one belongs to another key. reads and bytes count this
// round trip only.
func (n *node) readCandidates(ctx context.Context, dst, key []byte, cands []table.Slot, nFirst int, a *getAttempt) (readResult, error) {
	if len(cands) > transport.MaxBatch {
		return readResult{}, errCandidates
	}
	g, s := a.g, a.s
	ops := s.ops[:0]
	for i, sl := range cands {
		if !g.inArea(sl) {
			return readResult{}, errTorn // a torn bucket read: never READ outside the record area
		}
		s.recs[i] = grow(s.recs[i], int(sl.Len))
		ops = append(ops, transport.ReadOp{Remote: g.region, Offset: sl.Offset, Dst: s.recs[i]})
	}
	if err := n.conn.Read(ctx, ops); err != nil {
		return readResult{}, err
	}
	res := readResult{roundTrips: 2, reads: len(ops), bytes: readBytes(ops)}
	if err := n.judge(a, max(a.exp, a.r1)); err != nil {
		return res, err
	}
	for i, sl := range cands {
		val, meta, err := g.hdr.VerifyRecord(s.recs[i], key, sl)
		switch {
		case err == nil:
			n.cache.put(key, location{word: sl.Word(), second: i >= nFirst})
			res.value, res.meta, res.found = append(dst, val...), meta, true
			res.rev = hitRevision(max(a.rev0, a.rev1), meta) // round trip 1's header came before the record
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
// if the key is absent from this second reading too and the flag reads
// clear (docs/layout.md, "Reading": two readings that each miss the key,
// one after the other, cannot both have been fooled by a move, and the
// writer's rules M3 and M4 tie the flag read here to the key's presence
// throughout the GET). others are the out-of-place slots of round trip 1
// with the key's fingerprint, all proven another key's; inline records
// are verified from the new bucket reads. res counts the round trips
// (this one included) and the READs before this one.
func (n *node) proveMiss(ctx context.Context, dst, key []byte, b1, b2 uint32, others []table.Slot, a *getAttempt, res readResult) (readResult, error) {
	g, s := a.g, a.s
	ops := g.bucketOps(append(s.ops[:0], transport.ReadOp{Remote: g.region, Offset: 0, Dst: s.hdr2[:]}), b1, b2, &s.bk2)
	if err := n.conn.Read(ctx, ops); err != nil {
		return readResult{}, err
	}
	res.reads, res.bytes = res.reads+len(ops), res.bytes+readBytes(ops)
	hdr, err := checkHeader(g, s.hdr2[:])
	if err != nil {
		return readResult{}, err // a rebuild, seen first by a miss
	}
	a.saw(hdr)
	k := &s.scan2
	k.reset(key, g, dst, s.slots2[:0])
	k.buckets(&s.bk2)
	if k.found {
		// The key's inline record appeared: a hit read in this round trip,
		// judged by an expiry read before it.
		return n.inlineHit(key, k, a, max(a.exp, a.r1), max(a.rev0, a.rev1), res)
	}
	if k.bad != nil || !onlyOthers(k.oop, others) {
		return readResult{}, errUnstable
	}
	a.arena = a.arena || k.inline
	// Only the expiry cached before the GET judges a miss: the proof
	// finds an instant of the GET when the node lacked the key, which may
	// be any, so the lease must cover the whole GET.
	if err := n.judge(a, a.exp); err != nil {
		return readResult{}, err
	}
	if hdr.Incomplete {
		return readResult{}, errIncomplete
	}
	return res, nil
}

// onlyOthers reports whether every out-of-place slot in now is one of
// others (slot words proven another key's earlier in the GET). The same
// word cannot name a record of the key now: that would take the other
// key's record to be retired and its bytes reused, a grace period at least,
// within the GET.
func onlyOthers(now, others []table.Slot) bool {
	for _, sl := range now {
		if !slices.ContainsFunc(others, func(o table.Slot) bool { return o.Word() == sl.Word() }) {
			return false
		}
	}
	return true
}

// judge is the decision after a GET's last READ: the GET was quick enough
// that none of the bytes its answer rests on can have been reused under it,
// and (for a linearizable GET) the lease expiring at exp, one this answer
// may be judged by (getAttempt), still holds by the client's bound on the
// node's clock.
func (n *node) judge(a *getAttempt, exp uint64) error {
	return n.judgeAt(a, exp, n.clock.now())
}

// judgeAt is judge with the decision's clock reading now, which must have
// been taken after the GET's last READ completed.
func (n *node) judgeAt(a *getAttempt, exp uint64, now mono) error {
	if now.sub(a.start) >= a.maxAge() {
		return errTooSlow
	}
	if !a.needLease {
		return nil
	}
	err := n.clock.check(exp, now)
	if err != nil && a.seen > exp && n.clock.check(a.seen, now) == nil {
		return errLeaseLate
	}
	return err
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
