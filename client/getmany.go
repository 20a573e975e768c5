package client

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"sync"

	"github.com/kvd-project/kvd/internal/limits"
	"github.com/kvd-project/kvd/internal/revision"
	"github.com/kvd-project/kvd/internal/table"
	"github.com/kvd-project/kvd/transport"
)

// MaxGetMany is the most keys one GetMany call accepts.
const MaxGetMany = limits.MaxGetManyKeys

// batchKeys is how many keys share one one-sided batch: the first round
// trip READs both candidate buckets of each key, and the header when the
// cached lease is due, and that must fit one READ batch
// (transport.MaxBatch).
const batchKeys = (transport.MaxBatch - 1) / 2

// Result is one key's answer in GetMany.
type Result struct {
	Value []byte
	Found bool
	// Meta is the key's revision metadata (from an RPC answer, its mod
	// revision alone).
	Meta
	// meta is the key's revision metadata and rev the store revision the
	// answer was served at, when a one-sided read answered (getResult).
	meta revision.Meta
	rev  uint64
}

// GetMany reads every key in keys (at most MaxGetMany) at the consistency
// level of a Get with the same options, and returns one Result per key, in
// order. A key that does not exist has Found false; any other failure fails
// the call.
//
// One-sided levels read the keys in batches of up to 7 whose READs are
// posted together: two round trips per batch, not per key (one if every
// key's record is inline in its buckets). Each key keeps
// the guarantee a Get gives it (the same checks, the lease judged after the
// batch's last READ); a key the batch cannot prove (a torn or moving
// bucket, a region flagged incomplete, a failed lease check) is read on its
// own by Get's protocol, with its retries and RPC fallback. Each key is
// linearizable on its own; the results are not one atomic snapshot (GetManyAtomic gives one).
func (c *Client) GetMany(ctx context.Context, keys [][]byte, opts ...ReadOption) ([]Result, error) {
	if err := checkKeys(keys); err != nil {
		return nil, err
	}
	level := resolveLevel(c.cfg.Consistency, opts)
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	out := make([]Result, len(keys))
	for start := 0; start < len(keys); start += batchKeys {
		end := min(start+batchKeys, len(keys))
		if err := c.getBatch(ctx, keys[start:end], out[start:end], level); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func checkKeys(keys [][]byte) error {
	if len(keys) > MaxGetMany {
		return fmt.Errorf("%w: %d keys in one GetMany, at most %d", ErrBadRequest, len(keys), MaxGetMany)
	}
	for _, k := range keys {
		if err := checkKey(k); err != nil {
			return err
		}
	}
	return nil
}

// getBatch answers up to batchKeys keys: one-sided together where it can,
// the rest one by one.
func (c *Client) getBatch(ctx context.Context, keys [][]byte, out []Result, level Consistency) error {
	var done uint32 // bit i: out[i] is answered
	if level != ReadIndex {
		done = c.batchOneSided(ctx, keys, out, level)
	}
	for i, k := range keys {
		if done&(1<<i) != 0 {
			continue
		}
		r, err := c.get(ctx, nil, k, []ReadOption{WithConsistency(level)})
		v, ver := r.value, r.meta.Mod
		switch {
		case errors.Is(err, ErrNotFound):
			out[i] = Result{}
		case err != nil:
			return fmt.Errorf("get %q: %w", k, err)
		default:
			out[i] = Result{Value: v, Meta: Meta{ModRevision: ver}, Found: true}
		}
	}
	return nil
}

// batchScratch holds one batch's buffers; pooled. Bucket buffers are as
// long as the geometry's buckets (fit).
type batchScratch struct {
	hdr1, hdr2 [table.HeaderSize]byte
	bk1, bk2   [batchKeys][2][]byte // sized bytes each
	sized      int
	slots      [batchKeys][2 * table.SlotsPerBucket]table.Slot
	scans      [batchKeys]keyScan // round trip 1's, per key
	plan       [batchKeys]uint8
	checks     int // keys planned planCheck
	recs       [transport.MaxBatch][]byte
	ops        [transport.MaxBatch]transport.ReadOp
}

var batchPool = sync.Pool{New: func() any { return new(batchScratch) }}

// fit sizes the bucket buffers for g, once per geometry (getScratch.fit).
func (s *batchScratch) fit(g *geometry) {
	if s.sized == g.bucketBytes {
		return
	}
	s.sized = g.bucketBytes
	for i := range s.bk1 {
		for j := range 2 {
			s.bk1[i][j] = grow(s.bk1[i][j], g.bucketBytes)
			s.bk2[i][j] = grow(s.bk2[i][j], g.bucketBytes)
		}
	}
}

// What a batch does for a key after round trip 1.
const (
	planNone   uint8 = iota // no room in the batch, or nothing provable: the key is read on its own
	planInline              // a live inline record in round trip 1: answered from it
	planHit                 // READ every out-of-place record whose fingerprint matched
	planCheck               // nothing of the key's: READ both buckets again, to prove the miss
)

// batchOneSided runs one attempt of the read protocol (see getOneSided) for
// several keys at once and reports, as a bit set, which keys it answered.
// Whatever it cannot prove it leaves to the single-key path, so it has no
// retry logic of its own.
func (c *Client) batchOneSided(ctx context.Context, keys [][]byte, out []Result, level Consistency) uint32 {
	needLease := level == Linearizable
	n, err := c.nodeFor(ctx, c.readTarget(level))
	if err != nil {
		return 0
	}
	n.attempts.begin()
	defer n.attempts.end()
	if needLease {
		if now := c.now(); n.clock.age(now) > clockMaxAge {
			_ = n.syncClock(ctx)
		} else {
			n.maybeRefreshClock(now)
		}
	}
	s := batchPool.Get().(*batchScratch)
	defer batchPool.Put(s)
	// The lease as a Get judges it (leasecache.go): an expiry cached before
	// the first READ, or the header read first in round trip 1.
	a := n.newAttempt(needLease, c.now(), nil)
	g := a.g
	s.fit(g)

	// Round trip 1: both buckets of every key (and the header, if the
	// cached lease is due).
	ops := a.firstOps(s.ops[:0], s.hdr1[:])
	for i, k := range keys {
		b1, b2 := table.Buckets(table.Hash(k), g.nbuckets)
		ops = g.bucketOps(ops, b1, b2, &s.bk1[i])
	}
	if n.conn.Read(ctx, ops) != nil {
		return 0
	}
	reads, nbytes, rounds := len(ops), readBytes(ops), 1
	if a.takeHeader(s.hdr1[:]) != nil {
		return 0
	}

	// Round trip 2 (unless every key was answered inline): candidate
	// records, and, for keys that matched nothing of theirs, the header and
	// their buckets again (the one-header miss proof).
	ops = c.planBatch(s, ops[:0], g, keys)
	if len(ops) > 0 {
		if n.conn.Read(ctx, ops) != nil {
			return 0
		}
		reads, nbytes, rounds = reads+len(ops), nbytes+readBytes(ops), 2
	}
	j, ok := s.judgeBatch(n, &a, c.now())
	if !ok {
		return 0
	}
	done := s.decide(n, &a, keys, out, j)
	c.stats.batch(done, rounds, reads, nbytes)
	return done
}

// batchJudgement is which answers of a batch the lease and the clock allow.
type batchJudgement struct {
	inline bool // hits read in round trip 1: the expiry cached before it, younger than Gi/2
	hits   bool // hits whose records round trip 2 read: that, or round trip 1's header
	misses bool // misses: the cached expiry alone, and round trip 2's header complete
	young  bool // younger than Gi/2: a decision may rest on arena bytes
}

// judgeBatch is the decision's lease and age checks, as a Get makes them
// (getAttempt), with now taken after the batch's last READ. ok is false if
// nothing can be answered.
func (s *batchScratch) judgeBatch(n *node, a *getAttempt, now mono) (j batchJudgement, ok bool) {
	g, age := a.g, now.sub(a.start)
	if age >= g.maxAge {
		return j, false
	}
	lease := func(exp uint64) bool { return !a.needLease || n.clock.check(exp, now) == nil }
	j.young = age < g.inlineAge
	j.inline = j.young && lease(a.exp)
	j.hits = lease(max(a.exp, a.r1))
	if s.checks > 0 {
		hdr, err := checkHeader(g, s.hdr2[:])
		if err != nil {
			return j, false
		}
		g.lease.offerHeader(hdr)
		j.misses = lease(a.exp) && !hdr.Incomplete
	}
	return j, true
}

// planBatch scans round trip 1's buckets, builds round trip 2 and records
// in s.plan what it reads for each key. The header comes first, and only
// if some key needs a miss proof.
func (c *Client) planBatch(s *batchScratch, ops []transport.ReadOp, g *geometry, keys [][]byte) []transport.ReadOp {
	ops = append(ops, transport.ReadOp{Remote: g.region, Dst: s.hdr2[:]})
	rec := 0
	s.checks = 0
	for i, k := range keys {
		s.plan[i] = planNone
		sc := &s.scans[i]
		sc.reset(k, g, nil, s.slots[i][:0])
		sc.buckets(&s.bk1[i])
		switch {
		case sc.found:
			s.plan[i] = planInline
		case sc.bad != nil:
			// dead, hidden or torn: read on its own, with retries
		case len(sc.oop) == 0:
			if len(ops)+2 <= transport.MaxBatch {
				b1, b2 := table.Buckets(table.Hash(k), g.nbuckets)
				ops = g.bucketOps(ops, b1, b2, &s.bk2[i])
				s.plan[i] = planCheck
				s.checks++
			}
		case len(ops)+len(sc.oop) <= transport.MaxBatch && allInArea(g, sc.oop):
			for _, sl := range sc.oop {
				s.recs[rec] = grow(s.recs[rec], int(sl.Len))
				ops = append(ops, transport.ReadOp{Remote: g.region, Offset: sl.Offset, Dst: s.recs[rec]})
				rec++
			}
			s.plan[i] = planHit
		}
		// else read on its own (which also judges a torn bucket)
	}
	if s.checks == 0 {
		ops = ops[1:] // no miss to prove: no header
	}
	return ops
}

func allInArea(g *geometry, slots []table.Slot) bool {
	for _, sl := range slots {
		if !g.inArea(sl) {
			return false
		}
	}
	return true
}

// decide answers the keys whose reads prove their answer, as getOneSided
// would, by what j allows.
func (s *batchScratch) decide(n *node, a *getAttempt, keys [][]byte, out []Result, j batchJudgement) uint32 {
	g := a.g
	var done uint32
	rec := 0
	for i, k := range keys {
		sc := &s.scans[i]
		ok := false
		switch s.plan[i] {
		case planInline:
			if ok = j.inline; ok {
				// Read in round trip 1: only the revision cached before it counts.
				out[i] = Result{Value: sc.value, Meta: metaOf(sc.meta), Found: true, meta: sc.meta, rev: hitRevision(a.rev0, sc.meta)}
				n.cache.put(k, sc.loc)
			}
		case planHit:
			recs := s.recs[rec : rec+len(sc.oop)]
			rec += len(sc.oop)
			ok = j.hits && s.hit(n, g, k, sc, recs, max(a.rev0, a.rev1), &out[i])
		case planCheck:
			ok = j.misses && (j.young || !sc.inline) && s.proven(i, k, g, j.young)
			if ok {
				out[i] = Result{}
			}
		}
		if ok {
			done |= 1 << i
		}
	}
	return done
}

// hit verifies a key's out-of-place candidates, as readCandidates does.
// false: every candidate another key's (a miss not yet proven), or the
// record dead or torn: the key is read on its own.
func (s *batchScratch) hit(n *node, g *geometry, k []byte, sc *keyScan, recs [][]byte, rev uint64, out *Result) bool {
	for j, sl := range sc.oop {
		val, meta, err := g.hdr.VerifyRecord(recs[j], k, sl)
		if errors.Is(err, table.ErrKeyMismatch) {
			continue // another key with the same fingerprint
		}
		if err != nil {
			return false
		}
		*out = Result{Value: append([]byte(nil), val...), Meta: metaOf(meta), Found: true, meta: meta, rev: hitRevision(rev, meta)}
		n.cache.put(k, location{word: sl.Word(), second: j >= sc.nFirst})
		return true
	}
	return false
}

// proven reports whether key i's second reading of its buckets holds
// nothing of the key's either (round trip 1 held no out-of-place slot of
// its fingerprint, and no inline record of it): docs/layout.md, Reading.
// Inline records shown to be another key's count only if the batch was
// young enough to trust arena bytes.
func (s *batchScratch) proven(i int, k []byte, g *geometry, young bool) bool {
	var again keyScan
	again.reset(k, g, nil, s.slots[i][:0])
	again.buckets(&s.bk2[i])
	return !again.found && again.bad == nil && len(again.oop) == 0 && (young || !again.inline)
}

// batch counts the keys a one-sided batch answered as one-sided GETs: the
// batch's round trips (one if every key was inline) and its READs are
// shared among them, so the
// per-GET figures show what batching saves.
func (c *counters) batch(done uint32, rounds, reads, nbytes int) {
	k := uint64(bits.OnesCount32(done))
	if k == 0 {
		return
	}
	c.gets.Add(k)
	c.oneSided.Add(k)
	c.roundTrips.Add(uint64(rounds))
	c.reads.Add(uint64(reads))
	c.readBytes.Add(uint64(nbytes))
}
