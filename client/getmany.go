package client

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"sync"

	"github.com/kvd-project/kvd/internal/table"
	"github.com/kvd-project/kvd/internal/wire"
	"github.com/kvd-project/kvd/transport"
)

// MaxGetMany is the most keys one GetMany call accepts.
const MaxGetMany = wire.MaxGetManyKeys

// batchKeys is how many keys share one one-sided batch: the first round
// trip READs the header and both candidate buckets of each key, and that
// must fit one READ batch (transport.MaxBatch).
const batchKeys = (transport.MaxBatch - 1) / 2

// Result is one key's answer in GetMany.
type Result struct {
	Value   []byte
	Version uint64 // the Raft index of the write that stored Value
	Found   bool
}

// GetMany reads every key in keys (at most MaxGetMany) at the consistency
// level of a Get with the same options, and returns one Result per key, in
// order. A key that does not exist has Found false; any other failure fails
// the call.
//
// One-sided levels read the keys in batches of up to 7 whose READs are
// posted together: two round trips per batch, not per key. Each key keeps
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
		v, ver, err := c.get(ctx, nil, k, []ReadOption{WithConsistency(level)})
		switch {
		case errors.Is(err, ErrNotFound):
			out[i] = Result{}
		case err != nil:
			return fmt.Errorf("get %q: %w", k, err)
		default:
			out[i] = Result{Value: v, Version: ver, Found: true}
		}
	}
	return nil
}

// batchScratch holds one batch's buffers; pooled.
type batchScratch struct {
	hdr1, hdr2 [table.HeaderSize]byte
	bk1, bk2   [batchKeys][2][table.BucketSize]byte
	slots      [batchKeys][2 * table.SlotsPerBucket]table.Slot
	cands      [batchKeys][]table.Slot
	nFirst     [batchKeys]int // cands[i][:nFirst[i]] are from the key's first bucket
	plan       [batchKeys]uint8
	checks     int // keys planned planCheck
	recs       [transport.MaxBatch][]byte
	ops        [transport.MaxBatch]transport.ReadOp
}

var batchPool = sync.Pool{New: func() any { return new(batchScratch) }}

// What round trip 2 of a batch does for a key.
const (
	planNone  uint8 = iota // no room in the batch: the key is read on its own
	planHit                // READ every record whose fingerprint matched
	planCheck              // nothing matched: READ both buckets again, to prove the miss
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
	if needLease {
		if now := monoNow(); n.clock.age(now) > clockMaxAge {
			_ = n.syncClock(ctx)
		} else {
			n.maybeRefreshClock(now)
		}
	}
	s := batchPool.Get().(*batchScratch)
	defer batchPool.Put(s)
	// The lease as a Get judges it (leasecache.go): an expiry cached before
	// the first READ, or the header read first in round trip 1.
	a := n.newAttempt(needLease, monoNow(), nil)
	g := a.g

	// Round trip 1: both buckets of every key (and the header, if the
	// cached lease is due).
	ops := a.firstOps(s.ops[:0], s.hdr1[:])
	for i, k := range keys {
		b1, b2 := table.Buckets(table.Hash(k), g.nbuckets)
		ops = append(ops,
			transport.ReadOp{Remote: g.region, Offset: g.hdr.BucketOffset(b1), Dst: s.bk1[i][0][:]},
			transport.ReadOp{Remote: g.region, Offset: g.hdr.BucketOffset(b2), Dst: s.bk1[i][1][:]})
	}
	if n.conn.Read(ctx, ops) != nil {
		return 0
	}
	reads, nbytes := len(ops), readBytes(ops)
	if a.takeHeader(s.hdr1[:]) != nil {
		return 0
	}

	// Round trip 2: candidate records, and, for keys that matched nothing,
	// the header and their buckets again (the one-header miss proof).
	ops = c.planBatch(s, ops[:0], g, keys)
	if n.conn.Read(ctx, ops) != nil {
		return 0
	}
	now := monoNow()
	if now.sub(a.start) >= g.maxAge {
		return 0
	}
	// Which expiry judges what is as in a Get (getAttempt): hits, whose
	// records round trip 2 read, by one cached before the batch or read in
	// round trip 1; misses by the cached one alone.
	hits := !needLease || n.clock.check(max(a.exp, a.r1), now) == nil
	misses, incomplete := false, true
	if s.checks > 0 {
		hdr, err := checkHeader(g, s.hdr2[:])
		if err != nil {
			return 0
		}
		g.lease.offer(hdr.LeaseExpiry)
		misses = !needLease || n.clock.check(a.exp, now) == nil
		incomplete = hdr.Incomplete
	}
	done := s.decide(n, keys, out, hits, misses && !incomplete)
	c.stats.batch(done, reads+len(ops), nbytes+readBytes(ops))
	return done
}

// planBatch builds round trip 2 and records in s.plan what it reads for
// each key. The header comes first, and only if some key needs a miss
// proof.
func (c *Client) planBatch(s *batchScratch, ops []transport.ReadOp, g *geometry, keys [][]byte) []transport.ReadOp {
	ops = append(ops, transport.ReadOp{Remote: g.region, Dst: s.hdr2[:]})
	rec := 0
	s.checks = 0
	for i, k := range keys {
		s.plan[i] = planNone
		s.cands[i], s.nFirst[i] = scanBuckets(&s.bk1[i], table.Fingerprint(table.Hash(k)), s.slots[i][:0])
		cands := s.cands[i]
		if len(cands) == 0 {
			if len(ops)+2 <= transport.MaxBatch {
				b1, b2 := table.Buckets(table.Hash(k), g.nbuckets)
				ops = append(ops,
					transport.ReadOp{Remote: g.region, Offset: g.hdr.BucketOffset(b1), Dst: s.bk2[i][0][:]},
					transport.ReadOp{Remote: g.region, Offset: g.hdr.BucketOffset(b2), Dst: s.bk2[i][1][:]})
				s.plan[i] = planCheck
				s.checks++
			}
			continue
		}
		if len(ops)+len(cands) > transport.MaxBatch || !allInArea(g, cands) {
			continue // read on its own (which also judges a torn bucket)
		}
		for _, sl := range cands {
			s.recs[rec] = grow(s.recs[rec], int(sl.Len))
			ops = append(ops, transport.ReadOp{Remote: g.region, Offset: sl.Offset, Dst: s.recs[rec]})
			rec++
		}
		s.plan[i] = planHit
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
// would: hits if the lease held for them, misses if it held for them and
// round trip 2's header showed the region complete.
func (s *batchScratch) decide(n *node, keys [][]byte, out []Result, hits, misses bool) uint32 {
	var done uint32
	rec := 0
	for i, k := range keys {
		switch s.plan[i] {
		case planHit:
			if !hits {
				continue
			}
			cands := s.cands[i]
			recs := s.recs[rec : rec+len(cands)]
			rec += len(cands)
			for j, sl := range cands {
				val, ver, err := table.VerifyRecord(recs[j], k, sl)
				if errors.Is(err, table.ErrKeyMismatch) {
					continue // another key with the same fingerprint
				}
				if err == nil {
					out[i] = Result{Value: append([]byte(nil), val...), Version: ver, Found: true}
					n.cache.put(k, location{word: sl.Word(), second: j >= s.nFirst[i]})
					done |= 1 << i
				}
				break
			}
			// Every candidate another key's (a miss not yet proven), or the
			// record dead or torn: the key is read on its own.
		case planCheck:
			// A miss is trusted only if neither reading of the buckets
			// holds a slot with the key's fingerprint (round trip 1 held
			// none), and the region is complete (docs/layout.md, Reading).
			if misses && onlyOthers(&s.bk2[i], table.Fingerprint(table.Hash(k)), nil, s.slots[i][:0]) {
				out[i] = Result{}
				done |= 1 << i
			}
		}
	}
	return done
}

// batch counts the keys a one-sided batch answered as one-sided GETs: the
// batch's two round trips and its READs are shared among them, so the
// per-GET figures show what batching saves.
func (c *counters) batch(done uint32, reads, nbytes int) {
	k := uint64(bits.OnesCount32(done))
	if k == 0 {
		return
	}
	c.gets.Add(k)
	c.oneSided.Add(k)
	c.roundTrips.Add(2)
	c.reads.Add(uint64(reads))
	c.readBytes.Add(uint64(nbytes))
}
