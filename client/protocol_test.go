package client

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/mmap"
	"github.com/kvd-project/kvd/internal/revision"
	"github.com/kvd-project/kvd/internal/table"
	"github.com/kvd-project/kvd/internal/wire"
	"github.com/kvd-project/kvd/transport"
)

// Header offsets (docs/layout.md) that these tests write directly, to make
// header states the table's writer never makes on its own.
const (
	hdrOffGrace      = 20
	hdrOffRecordEnd  = 32
	hdrOffGeneration = 56
)

// tmeta is the revision metadata the rig writes for its write number v.
func tmeta(v uint64) revision.Meta { return revision.Meta{Create: v, Mod: v, Version: 1} }

// answerNotFound stands for ErrNotFound in a test's expected answer.
const answerNotFound = "<not found>"

// rig is one client connected to one fakeTransport over a fresh table.
type rig struct {
	t   testing.TB
	f   *fakeTransport
	tbl *table.Table
	c   *Client
	ver uint64

	tclock atomic.Int64 // the table's clock, from where it starts
}

func newRig(t *testing.T) *rig { return newRigWith(t, table.Config{}) }

// newRigWith is newRig over a table formatted with cfg (Buckets and Now
// are the rig's, and Grace unless cfg sets one).
func newRigWith(t testing.TB, cfg table.Config) *rig { return newRigOn(t, cfg, nil) }

// newRigOn is newRigWith whose client and fake server read sim, if it is
// not nil, rather than the real clock: nothing moves their clocks but the
// test (simClock).
func newRigOn(t testing.TB, cfg table.Config, sim *simClock) *rig {
	t.Helper()
	mem, err := mmap.Alloc(64 << 10)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mmap.Free(mem) })
	// A table clock that never moves: nothing leaves limbo, so no record's
	// bytes are reused under a test. A long grace period: no GET is too
	// slow, however loaded the machine.
	// (advance moves it, for tests that need the grace period to pass.)
	stopped := time.Unix(1e6, 0)
	r := &rig{t: t}
	cfg.Buckets = 8
	if cfg.Grace == 0 {
		cfg.Grace = time.Minute
	}
	cfg.Now = func() time.Time { return stopped.Add(time.Duration(r.tclock.Load())) }
	tbl, err := table.Format(mem, cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.f, r.tbl = newFakeTransport(mem), tbl
	ccfg := Config{Endpoints: []string{fakeAddr}, Transport: r.f, RequestTimeout: 20 * time.Second}
	if sim != nil {
		r.f.clock = sim.server
		ccfg.Knobs.Clock = sim.client
	}
	r.c, err = New(ccfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.c.Close() }) // runs before the memory is freed
	return r
}

// newReadyRig is the state most tests start from: k = "v1", a lease valid
// for an hour, and the client connected (so it has cached that lease).
func newReadyRig(t *testing.T) *rig {
	t.Helper()
	r := newRig(t)
	r.put("k", "v1")
	r.lease(time.Hour)
	r.connect()
	return r
}

func (r *rig) put(key, value string) {
	r.t.Helper()
	r.ver++
	if err := r.tbl.Put([]byte(key), []byte(value), tmeta(r.ver)); err != nil {
		r.t.Fatalf("put %s: %v", key, err)
	}
}

// lease publishes a lease that ends d from now on the server's clock.
func (r *rig) lease(d time.Duration) { r.tbl.SetLease(uint64(r.f.serverClock() + int64(d))) }

func (r *rig) raw32(off uint64, f func(uint32) uint32) {
	binary.LittleEndian.PutUint32(r.f.mem[off:], f(binary.LittleEndian.Uint32(r.f.mem[off:])))
}

func (r *rig) raw64(off uint64, f func(uint64) uint64) {
	binary.LittleEndian.PutUint64(r.f.mem[off:], f(binary.LittleEndian.Uint64(r.f.mem[off:])))
}

// newGeneration changes only the generation word, as a rebuild that left
// everything else in place would.
func (r *rig) newGeneration() { r.raw64(hdrOffGeneration, func(g uint64) uint64 { return g + 1 }) }

// rebuild does what a server rebuilding its region does: unpublish every
// record, new generation, then put the keys back (at new places: the old
// bytes are in limbo).
func (r *rig) rebuild(kv ...string) {
	r.tbl.Reset()
	for i := 0; i+1 < len(kv); i += 2 {
		r.put(kv[i], kv[i+1])
	}
	if err := r.tbl.Reveal(); err != nil { // the rebuild's records turn live (no move freed bytes at once)
		r.t.Fatal(err)
	}
}

// slowAge is the maxAge shrinkMaxAge sets; sleepInEveryBatch sleeps longer.
const slowAge = 5 * time.Millisecond

// shrinkMaxAge makes the client believe the region's grace period is
// 2*slowAge (the table's is a minute, so nothing is reused for real).
func (r *rig) shrinkMaxAge() {
	n := r.node()
	g := *n.geo.Load()
	g.maxAge = slowAge
	n.geo.Store(&g)
}

// sleepInEveryBatch makes every READ batch take longer than slowAge.
func sleepInEveryBatch(_ *rig, _, op int) {
	if op == 0 {
		time.Sleep(4 * slowAge)
	}
}

// node is the client's current connection to the fake.
func (r *rig) node() *node {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	n := r.c.nodes[fakeAddr]
	if n == nil {
		r.t.Fatal("not connected")
	}
	return n
}

// get runs one GET and renders its answer: the value, answerNotFound, or the
// error.
func (r *rig) get(key string, level Consistency) string {
	r.t.Helper()
	v, err := r.c.Get(context.Background(), []byte(key), WithConsistency(level))
	switch {
	case errors.Is(err, ErrNotFound):
		return answerNotFound
	case err != nil:
		return "error: " + err.Error()
	}
	return string(v)
}

// warm reads key once (one-sided, two round trips) so that its location
// is cached for the GET under test.
func (r *rig) warm(key string) { r.warmWith(key, traceHit) }

// warmWith is warm for a GET that takes trace (an inline key's, say).
func (r *rig) warmWith(key string, trace []string) {
	r.t.Helper()
	r.f.begin(nil)
	if v := r.get(key, Linearizable); v != "v1" {
		r.t.Fatalf("warm-up get %s = %q", key, v)
	}
	if got, _ := r.f.end(); !slices.Equal(got, trace) {
		r.t.Fatalf("warm-up get %s took %v", key, got)
	}
	if _, ok := r.node().cache.get([]byte(key)); !ok {
		r.t.Fatalf("warm-up get %s left no cached location", key)
	}
}

// sharingBuckets returns a key, other than key, whose two candidate buckets
// are key's two: wherever the table puts it, it changes one of the buckets a
// GET of key reads.
func (r *rig) sharingBuckets(key string) string {
	nb := r.tbl.Header().Buckets
	a1, a2 := table.Buckets(table.Hash([]byte(key)), nb)
	for i := 0; ; i++ {
		k := fmt.Sprintf("neighbour-%d", i)
		b1, b2 := table.Buckets(table.Hash([]byte(k)), nb)
		if (b1 == a1 || b1 == a2) && (b2 == a1 || b2 == a2) {
			return k
		}
	}
}

// moveToOtherBucket moves key's slot from whichever of its buckets holds it
// to the other, as the writer moves keys.
// setState overwrites the state word of the record key's slot names, as
// the writer does in the middle of a write.
func (r *rig) setState(key string, state uint32) {
	binary.LittleEndian.PutUint32(r.record(key)[4:], state)
}

// record is the region's bytes of the out-of-place record of key that a
// slot names.
func (r *rig) record(key string) []byte {
	r.t.Helper()
	h := table.Hash([]byte(key))
	hdr := r.tbl.Header()
	b1, b2 := table.Buckets(h, hdr.Buckets)
	var out [table.SlotsPerBucket]table.Slot
	for _, b := range []uint32{b1, b2} {
		n := table.ScanBucket(r.f.mem[hdr.BucketOffset(b):], table.Fingerprint(h), &out)
		for _, sl := range out[:n] {
			rec := r.f.mem[sl.Offset : sl.Offset+sl.Len]
			if int(binary.LittleEndian.Uint16(rec[table.RecordHeaderSize-8:])) == len(key) && string(rec[table.RecordHeaderSize:table.RecordHeaderSize+len(key)]) == key {
				return rec
			}
		}
	}
	r.t.Fatalf("no record of %s", key)
	return nil
}

func (r *rig) moveToOtherBucket(key string) {
	r.t.Helper()
	b1, b2 := table.Buckets(table.Hash([]byte(key)), r.tbl.Header().Buckets)
	if !r.moveSlot(key, b1, b2) && !r.moveSlot(key, b2, b1) {
		r.t.Fatalf("could not move %s", key)
	}
}

// colliding returns a key other than key with key's fingerprint and its
// two candidate buckets (in a table of nbuckets): a GET of it finds key's
// slot among its candidates, wherever key is.
func colliding(key string, nbuckets uint32) string {
	h := table.Hash([]byte(key))
	a1, a2 := table.Buckets(h, nbuckets)
	for i := 0; ; i++ {
		k := fmt.Sprintf("collider-%d", i)
		hk := table.Hash([]byte(k))
		b1, b2 := table.Buckets(hk, nbuckets)
		if table.Fingerprint(hk) == table.Fingerprint(h) && (b1 == a1 && b2 == a2 || b1 == a2 && b2 == a1) {
			return k
		}
	}
}

// repTrace repeats a trace fragment n times.
func repTrace(n int, batches ...string) []string {
	var out []string
	for range n {
		out = append(out, batches...)
	}
	return out
}

// The traces of the protocol's paths, one string per READ batch (H header,
// B bucket, R record). A linearizable GET reads the header only when the
// lease expiry the client cached for the node is due (leasecache.go).
var (
	traceHit         = []string{"BB", "R"}    // uncached hit: two round trips, the second only the record
	traceMiss        = []string{"BB", "HBB"}  // miss: two round trips, no record; the header in the second
	traceCachedHit   = []string{"B", "R"}     // cached hit: the cached bucket's slot words, then the record
	traceHitH        = []string{"HBB", "R"}   // uncached hit, the lease due: the header joins round trip 1
	traceMissH       = []string{"HBB", "HBB"} // miss, the lease due
	traceCachedHitH  = []string{"HB", "R"}    // cached hit, the lease due
	traceCachedGone  = []string{"B"}          // the cached bucket no longer names the key: read uncached next
	traceCachedGoneH = []string{"HB"}         // the same, the lease due
	traceReread      = []string{"H"}          // the header re-read for the new geometry
)

func catTraces(parts ...[]string) []string { return slices.Concat(parts...) }

// forgetLease drops the lease expiry the client cached at connect, so that
// the next linearizable GET must read the header for one.
func (r *rig) forgetLease() { r.node().geo.Load().lease.exp.Store(0) }

// freshLease publishes a lease that ends d from now and makes the client
// read it (forgetLease): the state of a client that connected just now.
func (r *rig) freshLease(d time.Duration) {
	r.lease(d)
	r.forgetLease()
}

// cacheLease sets the lease expiry the client holds for the node to d from
// now on the server's clock (the header keeps its own).
func (r *rig) cacheLease(d time.Duration) {
	r.node().geo.Load().lease.exp.Store(uint64(r.f.serverClock() + int64(d)))
}

// noLeaseRefresh stops background lease refreshes for the rest of the test
// (they would add READ batches at times the trace cannot predict).
func noLeaseRefresh(r *rig) {
	l := r.node().geo.Load().lease
	l.refreshing.Store(true)
	r.t.Cleanup(func() { l.refreshing.Store(false) })
}

// protoCase is one GET under test. Before setup, the rig holds k = "v1" and
// a lease valid for an hour, and the client is connected (so it has cached
// that lease).
type protoCase struct {
	name  string
	level Consistency // default Linearizable
	key   string      // default "k"
	setup func(r *rig)
	hook  func(r *rig, batch, op int) // see fakeTransport; batch 1 is the GET's first READ
	want  string                      // the value, answerNotFound or rpcMarker

	// The path: exact, except that Retries["lease+clock"] stands for the
	// sum of the two (whether a lease check fails for want of a lease or
	// for a clock sample older than clockRetryAge depends on timing).
	oneSided, fallbacks uint64
	retries             map[string]uint64
	trace               []string
	dials               int64 // reconnections during the GET
	clockSyncs          int   // exact count if > 0
}

func TestReadProtocol(t *testing.T) {
	const R = defaultReadRetries
	cases := []protoCase{
		// The paths themselves.
		{name: "uncached hit", want: "v1", oneSided: 1, trace: traceHit},
		{name: "cached hit", setup: func(r *rig) { r.warm("k") }, want: "v1", oneSided: 1, trace: traceCachedHit},
		{name: "miss", key: "nope", want: answerNotFound, oneSided: 1, trace: traceMiss},

		// Lease: a linearizable read is accepted only with a lease the
		// server's clock cannot have passed; otherwise, after the retries,
		// it asks by RPC.
		{name: "lease expired, uncached", setup: func(r *rig) { r.freshLease(-time.Second) },
			want: rpcMarker, fallbacks: 1, retries: map[string]uint64{"lease+clock": R}, trace: repTrace(R, traceHitH...)},
		{name: "lease expired, cached", setup: func(r *rig) { r.warm("k"); r.freshLease(-time.Second) },
			want: rpcMarker, fallbacks: 1, retries: map[string]uint64{"lease+clock": R}, trace: repTrace(R, traceCachedHitH...)},
		{name: "lease expired, miss", key: "nope", setup: func(r *rig) { r.freshLease(-time.Second) },
			want: rpcMarker, fallbacks: 1, retries: map[string]uint64{"lease+clock": R}, trace: repTrace(R, traceMissH...)},
		{name: "lease zero, uncached", setup: func(r *rig) { r.tbl.SetLease(0); r.forgetLease() },
			want: rpcMarker, fallbacks: 1, retries: map[string]uint64{"lease": R}, trace: repTrace(R, traceHitH...)},
		{name: "lease zero, cached", setup: func(r *rig) { r.warm("k"); r.tbl.SetLease(0); r.forgetLease() },
			want: rpcMarker, fallbacks: 1, retries: map[string]uint64{"lease": R}, trace: repTrace(R, traceCachedHitH...)},
		{name: "lease ends inside the cached batch", setup: func(r *rig) { r.warm("k"); r.forgetLease() },
			hook: func(r *rig, batch, op int) {
				if batch == 1 && op == 0 {
					r.tbl.SetLease(0)
				}
			},
			want: rpcMarker, fallbacks: 1, retries: map[string]uint64{"lease": R}, trace: repTrace(R, traceCachedHitH...)},
		{name: "lease lapses by time, uncached", setup: func(r *rig) {
			r.freshLease(20 * time.Millisecond)
			time.Sleep(60 * time.Millisecond) // the server's clock (real time) passes the expiry
		}, want: rpcMarker, fallbacks: 1, retries: map[string]uint64{"lease+clock": R}, trace: repTrace(R, traceHitH...)},
		{name: "lease lapses by time, cached", setup: func(r *rig) {
			r.warm("k")
			r.freshLease(20 * time.Millisecond)
			time.Sleep(60 * time.Millisecond)
		}, want: rpcMarker, fallbacks: 1, retries: map[string]uint64{"lease+clock": R}, trace: repTrace(R, traceCachedHitH...)},
		// The cached expiry is a fact about time (leasecache.go): the node
		// cannot be succeeded before it, whatever its lease word says
		// since. A zero word (a step-down, a rebuild) does not withdraw it.
		{name: "lease word zeroed since it was cached, uncached", setup: func(r *rig) { r.tbl.SetLease(0) },
			want: "v1", oneSided: 1, trace: traceHit},
		{name: "lease word zeroed since it was cached, cached", setup: func(r *rig) { r.warm("k"); r.tbl.SetLease(0) },
			want: "v1", oneSided: 1, trace: traceCachedHit},
		// But it is judged at the decision, like a lease read in the GET.
		{name: "cached lease lapses during the GET", setup: func(r *rig) {
			r.freshLease(-time.Second)
			r.cacheLease(leaseDueMargin + 20*time.Millisecond) // not due at the start
			noLeaseRefresh(r)
		}, hook: func(r *rig, batch, op int) {
			if batch == 1 && op == 0 {
				time.Sleep(leaseDueMargin + 60*time.Millisecond)
			}
		}, want: rpcMarker, fallbacks: 1, retries: map[string]uint64{"lease+clock": R}, trace: catTraces(traceHit, repTrace(R-1, traceHitH...))},
		// The expiry a GET is judged by is the one cached before its first
		// READ (or read first in its own batch): one that a refresh reads
		// while the GET runs may come from a lease granted after the
		// record was read (leasecache.go).
		{name: "a lease cached during the GET is not used by it", setup: func(r *rig) {
			r.cacheLease(leaseDueMargin + 20*time.Millisecond)
			noLeaseRefresh(r)
		}, hook: func(r *rig, batch, op int) {
			if batch == 1 && op == 0 {
				time.Sleep(leaseDueMargin + 60*time.Millisecond)
				r.cacheLease(time.Hour) // as a background refresh would
			}
		}, want: "v1", oneSided: 1, retries: map[string]uint64{"lease+clock": 1}, trace: catTraces(traceHit, traceHit)},
		// A cached expiry close to the bound: the header joins round trip 1.
		// It judges a hit whose record round trip 2 read (cached or not); an
		// expiry read in the record's own batch (READs of a batch run in any
		// order), or one read for a miss, judges only the next attempt.
		{name: "cached lease lapsed, uncached", setup: func(r *rig) { r.cacheLease(-time.Millisecond) },
			want: "v1", oneSided: 1, trace: traceHitH},
		{name: "cached lease lapsed, cached", setup: func(r *rig) { r.warm("k"); r.cacheLease(-time.Millisecond) },
			want: "v1", oneSided: 1, trace: traceCachedHitH},
		{name: "cached lease lapsed, miss", key: "nope", setup: func(r *rig) { r.cacheLease(-time.Millisecond) },
			want: answerNotFound, oneSided: 1, retries: map[string]uint64{"lease": 1}, trace: catTraces(traceMissH, traceMiss)},
		// A restarted node has a new clock: its expiries mean nothing
		// against the old one. The lease is cached per connection, and a
		// new connection starts with the one its first header shows.
		{name: "redial drops the cached lease", setup: func(r *rig) {
			r.tbl.SetLease(0)
			r.node().close(errors.New("the server restarted"))
		}, want: rpcMarker, fallbacks: 1, dials: 1, retries: map[string]uint64{"lease": R},
			trace: catTraces(traceReread, repTrace(R, traceHitH...))},
		{name: "too slow, uncached", setup: func(r *rig) { r.shrinkMaxAge() }, hook: sleepInEveryBatch,
			want: rpcMarker, fallbacks: 1, retries: map[string]uint64{"slow": R}, trace: repTrace(R, traceHit...)},
		{name: "too slow, cached", setup: func(r *rig) { r.warm("k"); r.shrinkMaxAge() }, hook: sleepInEveryBatch,
			want: rpcMarker, fallbacks: 1, retries: map[string]uint64{"slow": R}, trace: catTraces(traceCachedGone, repTrace(R, traceHit...))},
		{name: "too slow in the cached batch only", setup: func(r *rig) { r.warm("k"); r.shrinkMaxAge() },
			hook: func(r *rig, batch, op int) {
				if batch == 1 {
					sleepInEveryBatch(r, batch, op)
				}
			}, want: "v1", oneSided: 1, trace: catTraces(traceCachedGone, traceHit)},

		// The lease is judged by a clock reading taken after the last READ,
		// not one from before it.
		{name: "lease lapses during the cached batch", setup: func(r *rig) {
			r.warm("k")
			r.freshLease(20 * time.Millisecond)
		}, hook: func(r *rig, batch, op int) {
			if batch == 1 && op == 0 {
				time.Sleep(60 * time.Millisecond)
			}
		}, want: rpcMarker, fallbacks: 1, retries: map[string]uint64{"lease+clock": R}, trace: repTrace(R, traceCachedHitH...)},
		// A hit's round trip 2 reads no header: a lease granted after
		// round trip 1 is seen by the next attempt.
		{name: "lease granted after round trip 1 (hit)", setup: func(r *rig) { r.tbl.SetLease(0); r.forgetLease() }, hook: func(r *rig, batch, op int) {
			if batch == 2 && op == 0 {
				r.lease(time.Hour)
			}
		}, want: "v1", oneSided: 1, retries: map[string]uint64{"lease": 1}, trace: catTraces(traceHitH, traceHitH)},
		// A miss is judged only by a lease cached before the GET: the one
		// round trip 2 read judges the next attempt.
		{name: "lease granted after round trip 1 (miss)", key: "nope", setup: func(r *rig) { r.tbl.SetLease(0); r.forgetLease() }, hook: func(r *rig, batch, op int) {
			if batch == 2 && op == 0 {
				r.lease(time.Hour)
			}
		}, want: answerNotFound, oneSided: 1, retries: map[string]uint64{"lease": 1}, trace: catTraces(traceMissH, traceMiss)},
		{name: "serializable ignores the lease", level: Serializable, setup: func(r *rig) { r.tbl.SetLease(0); r.forgetLease() },
			want: "v1", oneSided: 1, trace: traceHit},

		// The clock bound.
		{name: "idle clock sample is refreshed before the read", setup: func(r *rig) {
			// A bound so loose that only a fresh sample can accept the
			// lease; old enough (> clockMaxAge) to be replaced up front.
			r.node().clock.sample.Store(&clockSample{mono: r.f.serverClock() + int64(2*time.Hour), sent: monoNow() - mono(10*time.Second)})
		}, want: "v1", oneSided: 1, trace: traceHit, clockSyncs: 1},
		{name: "loose clock sample is refreshed at the lease check", setup: func(r *rig) {
			n := r.node()
			n.clock.refreshing.Store(true) // no background refresh: the lease check must ask
			r.t.Cleanup(func() { n.clock.refreshing.Store(false) })
			n.clock.sample.Store(&clockSample{mono: r.f.serverClock() + int64(2*time.Hour), sent: monoNow() - mono(100*time.Millisecond)})
		}, want: "v1", oneSided: 1, retries: map[string]uint64{"clock": 1}, trace: catTraces(traceHitH, traceHit), clockSyncs: 1},
		{name: "server clock moved past the expiry", setup: func(r *rig) {
			r.warm("k")
			r.lease(time.Minute)
			r.f.clockOffset.Add(int64(time.Hour))
			r.node().clock.sample.Store(nil) // the client samples the moved clock
		}, want: rpcMarker, fallbacks: 1, retries: map[string]uint64{"lease+clock": R}, trace: repTrace(R, traceCachedHitH...)},

		// Generation and geometry. A hit does not depend on them (the
		// region's geometry is fixed when it is formatted, and a rebuild
		// retires every record before it clears a slot), so it reads no
		// header for them; a header of another generation or geometry,
		// wherever a GET reads one, makes the client re-read it on the same
		// connection (no dial: dials stays 0) and adopt it.
		{name: "generation changed between round trips (hit)", hook: func(r *rig, batch, op int) {
			if batch == 2 && op == 0 {
				r.newGeneration()
			}
		}, want: "v1", oneSided: 1, trace: traceHit},
		{name: "generation changed between round trips, seen first by a miss", key: "nope", hook: func(r *rig, batch, op int) {
			if batch == 2 && op == 0 {
				r.newGeneration()
			}
		}, want: answerNotFound, oneSided: 1, retries: map[string]uint64{"geometry": 1},
			trace: catTraces(traceMiss, traceReread, traceMiss)},
		{name: "rebuilt between round trips", hook: func(r *rig, batch, op int) {
			if batch == 2 && op == 0 {
				r.rebuild("k", "v2")
			}
		}, want: "v2", oneSided: 1, retries: map[string]uint64{"stale": 1},
			trace: catTraces(traceHit, traceHit)},
		{name: "generation changed before the cached batch", setup: func(r *rig) { r.warm("k"); r.newGeneration() },
			want: "v1", oneSided: 1, trace: traceCachedHit},
		{name: "generation changed inside the cached batch, before its header", setup: func(r *rig) { r.warm("k"); r.forgetLease() },
			hook: func(r *rig, batch, op int) {
				if batch == 1 && op == 0 {
					r.newGeneration()
				}
			}, want: "v1", oneSided: 1, retries: map[string]uint64{"geometry": 1},
			trace: catTraces(traceCachedGoneH, traceReread, traceHit)},
		{name: "rebuilt inside the cached batch, after its header", setup: func(r *rig) { r.warm("k"); r.forgetLease() },
			hook: func(r *rig, batch, op int) {
				if batch == 1 && op == 1 {
					r.rebuild("k", "v2")
				}
			}, want: "v2", oneSided: 1,
			// The rebuild moved the record before the bucket was read: the
			// slot read there names the new one, judged by the header.
			trace: traceCachedHitH},
		{name: "grace changed between round trips (miss)", key: "nope", hook: func(r *rig, batch, op int) {
			if batch == 2 && op == 0 {
				r.raw32(hdrOffGrace, func(g uint32) uint32 { return g + 1 })
			}
		}, want: answerNotFound, oneSided: 1, retries: map[string]uint64{"geometry": 1},
			trace: catTraces(traceMiss, traceReread, traceMiss)},
		{name: "grace changed inside the cached batch", setup: func(r *rig) { r.warm("k"); r.forgetLease() },
			hook: func(r *rig, batch, op int) {
				if batch == 1 && op == 0 {
					r.raw32(hdrOffGrace, func(g uint32) uint32 { return g * 2 })
				}
			}, want: "v1", oneSided: 1, retries: map[string]uint64{"geometry": 1},
			trace: catTraces(traceCachedGoneH, traceReread, traceHit)},
		{name: "record area changed", setup: func(r *rig) {
			r.raw64(hdrOffRecordEnd, func(e uint64) uint64 { return e - table.RecordAlign })
			r.forgetLease()
		}, want: "v1", oneSided: 1, retries: map[string]uint64{"geometry": 1},
			trace: catTraces([]string{"HBB"}, traceReread, traceHit)},

		// The incomplete flag: a miss from an incomplete region is asked
		// by RPC. One header read, in round trip 2, decides: the writer's
		// rules M3 and M4 (docs/layout.md, "Reading") make a flag read
		// clear there cover the whole GET.
		{name: "miss, region incomplete", key: "nope", setup: func(r *rig) { r.tbl.SetIncomplete(true) },
			want: rpcMarker, fallbacks: 1, retries: map[string]uint64{"other": 1}, trace: traceMiss},
		{name: "hit, region incomplete", setup: func(r *rig) { r.tbl.SetIncomplete(true) },
			want: "v1", oneSided: 1, trace: traceHit},
		{name: "miss, incomplete set between the round trips", key: "nope", hook: func(r *rig, batch, op int) {
			if batch == 2 && op == 0 {
				r.tbl.SetIncomplete(true)
			}
		}, want: rpcMarker, fallbacks: 1, retries: map[string]uint64{"other": 1}, trace: traceMiss},
		{name: "miss, incomplete set and cleared between the round trips", key: "nope", hook: func(r *rig, batch, op int) {
			if batch == 2 && op == 0 {
				r.tbl.SetIncomplete(true)
				r.tbl.SetIncomplete(false)
			}
		}, want: answerNotFound, oneSided: 1, trace: traceMiss},
		{name: "miss, region completed between the round trips", key: "nope",
			setup: func(r *rig) { r.tbl.SetIncomplete(true) },
			hook: func(r *rig, batch, op int) {
				if batch == 2 && op == 0 {
					r.tbl.SetIncomplete(false)
				}
			}, want: answerNotFound, oneSided: 1, trace: traceMiss},
		{name: "cached hit, incomplete set before the record is read", setup: func(r *rig) { r.warm("k") },
			hook: func(r *rig, batch, op int) {
				if batch == 1 && op == 0 {
					r.tbl.SetIncomplete(true)
				}
			}, want: "v1", oneSided: 1, trace: traceCachedHit},

		// A cached out-of-place location reads the bucket that held the
		// key's slot, then the records its slots of the key's fingerprint
		// name, as round trip 2 of an uncached GET does: bytes at a cached
		// offset, read without a slot read before them, prove nothing (a
		// value can hold the image of a record, crc and all:
		// TestCachedOffsetHoldsARecordImage). Anything else is read
		// afresh, uncached.
		{name: "cached, updated since", setup: func(r *rig) { r.warm("k"); r.put("k", "v2") },
			want: "v2", oneSided: 1, trace: traceCachedHit}, // the new slot is in the same bucket
		{name: "cached, the new record published and not yet live", setup: func(r *rig) {
			r.warm("k")
			r.put("k", "v2")
			r.setState("k", 2) // the moment between the slot store and the new record turning live
		}, hook: func(r *rig, batch, op int) {
			if batch == 4 && op == 0 {
				r.setState("k", 0)
			}
		}, want: "v2", oneSided: 1, trace: catTraces(traceCachedHit, traceHit)}, // not taken hidden in batch 2
		{name: "cached, moved to the other bucket since", setup: func(r *rig) { r.warm("k"); r.moveToOtherBucket("k") },
			want: "v1", oneSided: 1, trace: catTraces(traceCachedGone, traceHit)},
		{name: "cached, deleted since", setup: func(r *rig) {
			r.warm("k")
			if _, err := r.tbl.Delete([]byte("k")); err != nil {
				r.t.Fatal(err)
			}
		}, want: answerNotFound, oneSided: 1, trace: catTraces(traceCachedGone, traceMiss)},

		// A miss whose buckets hold another key with its fingerprint: round
		// trip 2 reads that key's record, then a third proves the miss.
		{name: "miss, fingerprint shared with a stored key", key: colliding("k", 8), want: answerNotFound, oneSided: 1,
			trace: catTraces(traceHit, []string{"HBB"})},
		// The proof needs the key absent from each reading, not the
		// buckets unchanged: a neighbour's churn costs no retry.
		{name: "miss, fingerprint shared, neighbour stored before the proof", key: colliding("k", 8), hook: func(r *rig, batch, op int) {
			if batch == 3 && op == 1 {
				r.put(r.sharingBuckets(colliding("k", 8)), "other")
			}
		}, want: answerNotFound, oneSided: 1, trace: catTraces(traceHit, []string{"HBB"})},
		{name: "miss, neighbour stored between the round trips", key: "nope", hook: func(r *rig, batch, op int) {
			if batch == 2 && op == 1 {
				r.put(r.sharingBuckets("nope"), "other")
			}
		}, want: answerNotFound, oneSided: 1, trace: traceMiss},
		// A slot with the key's fingerprint that round trip 1 did not prove
		// another key's may be the key's: read again.
		{name: "miss, fingerprint twin stored between the round trips", key: "nope", hook: func(r *rig, batch, op int) {
			if batch == 2 && op == 1 {
				r.put(colliding("nope", 8), "twin")
			}
		}, want: answerNotFound, oneSided: 1, retries: map[string]uint64{"unstable": 1},
			trace: catTraces(traceMiss, traceHit, []string{"HBB"})},
		{name: "miss, key stored between reads", key: "nope", hook: func(r *rig, batch, op int) {
			if batch == 2 && op == 1 {
				r.put("nope", "v-new")
			}
		}, want: "v-new", oneSided: 1, retries: map[string]uint64{"unstable": 1}, trace: catTraces(traceMiss, traceHit)},
	}
	runProtoCases(t, cases, newReadyRig)
}

// runProtoCases runs each case on a rig from ready and checks its answer,
// READ trace and counters.
func runProtoCases(t *testing.T, cases []protoCase, ready func(*testing.T) *rig) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := ready(t)
			if tc.setup != nil {
				tc.setup(r)
			}
			key := tc.key
			if key == "" {
				key = "k"
			}
			var hook func(batch, op int)
			if tc.hook != nil {
				hook = func(batch, op int) { tc.hook(r, batch, op) }
			}
			s0, d0 := r.c.Stats(), r.f.dials.Load()
			r.f.begin(hook)
			got := r.get(key, tc.level)
			trace, rpcGets := r.f.end()
			s1 := r.c.Stats()

			if got != tc.want {
				t.Errorf("answer %q, want %q", got, tc.want)
			}
			if !slices.Equal(trace, tc.trace) {
				t.Errorf("READ batches %v, want %v", trace, tc.trace)
			}
			if d := s1.OneSided - s0.OneSided; d != tc.oneSided {
				t.Errorf("OneSided +%d, want +%d", d, tc.oneSided)
			}
			if d := s1.Fallbacks - s0.Fallbacks; d != tc.fallbacks {
				t.Errorf("Fallbacks +%d, want +%d", d, tc.fallbacks)
			}
			retries := map[string]uint64{}
			for k, v := range s1.Retries {
				if d := v - s0.Retries[k]; d != 0 {
					retries[k] = d
				}
			}
			if n, ok := tc.retries["lease+clock"]; ok {
				if got := retries["lease"] + retries["clock"]; got != n {
					t.Errorf("lease+clock retries %d, want %d", got, n)
				}
				delete(retries, "lease")
				delete(retries, "clock")
				retries["lease+clock"] = n
			}
			if want := tc.retries; !reflect.DeepEqual(retries, want) && (len(retries) != 0 || len(want) != 0) {
				t.Errorf("retries %v, want %v", retries, want)
			}
			if d := r.f.dials.Load() - d0; d != tc.dials {
				t.Errorf("%d dials, want %d", d, tc.dials)
			}
			if tc.clockSyncs > 0 {
				if d := s1.ClockSyncs - s0.ClockSyncs; d != uint64(tc.clockSyncs) {
					t.Errorf("ClockSyncs +%d, want +%d", d, tc.clockSyncs)
				}
			}
			var wantRPC []uint16
			switch {
			case tc.fallbacks > 0 && tc.level == Serializable:
				wantRPC = []uint16{wire.Serializable}
			case tc.fallbacks > 0:
				wantRPC = []uint16{wire.Linearizable}
			}
			if !slices.Equal(rpcGets, wantRPC) {
				t.Errorf("RPC GETs with flags %v, want %v", rpcGets, wantRPC)
			}
			if t.Failed() {
				t.Logf("stats before %+v\nstats after  %+v", s0, s1)
			}
		})
	}
}

// TestReadProtocolFakeIsSound checks the fake itself: the region it serves
// is the table's, READs outside it fail, and its RPC answers are the ones
// the tests recognise.
func TestReadProtocolFakeIsSound(t *testing.T) {
	r := newRig(t)
	r.put("k", "v1")
	r.lease(time.Hour)
	n, err := r.c.nodeFor(context.Background(), fakeAddr)
	if err != nil {
		t.Fatal(err)
	}
	if g := n.geo.Load(); g.hdr.Generation != r.tbl.Header().Generation || g.nbuckets != 8 {
		t.Fatalf("geometry %+v, table %+v", g.hdr, r.tbl.Header())
	}
	if v := r.get("k", ReadIndex); v != rpcMarker {
		t.Fatalf("readindex get = %q, want the RPC marker", v)
	}
	if err := n.conn.Read(context.Background(), []transport.ReadOp{{Remote: n.geo.Load().region, Offset: uint64(len(r.f.mem)) - 4, Dst: make([]byte, 8)}}); err == nil {
		t.Fatal("READ past the region succeeded")
	}
	if !strings.HasPrefix(r.get("k", Linearizable), "v1") {
		t.Fatal("the client could not read k one-sided")
	}
}
