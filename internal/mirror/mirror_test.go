package mirror

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/kv"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
	"github.com/kvd-project/kvd/internal/revision"
	"github.com/kvd-project/kvd/internal/table"
	"github.com/kvd-project/kvd/internal/wire"
)

const testGrace = 20 * time.Millisecond

// memStore is a Store over a map: the durable state as a test sets it.
type memStore struct {
	mu   sync.Mutex
	kvs  map[string]memValue
	rev  uint64 // the largest version put
	fail error  // ForEach fails with it, if set
}

type memValue struct {
	value   []byte
	version uint64
}

func newMemStore() *memStore { return &memStore{kvs: map[string]memValue{}} }

func (s *memStore) put(key, value string, version uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kvs[key] = memValue{[]byte(value), version}
	s.rev = max(s.rev, version)
}

func (s *memStore) del(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.kvs, key)
}

func (s *memStore) Get(key []byte) ([]byte, revision.Meta, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.kvs[string(key)]
	if !ok {
		return nil, revision.Meta{}, false, nil
	}
	return v.value, revision.Meta{Create: v.version, Mod: v.version, Version: 1}, true, nil
}

func (s *memStore) ForEach(fn func(key, value []byte, m revision.Meta) error) error {
	s.mu.Lock()
	keys := slices.Sorted(maps.Keys(s.kvs))
	s.mu.Unlock()
	for _, k := range keys {
		value, m, ok, _ := s.Get([]byte(k))
		if !ok {
			continue
		}
		if err := fn([]byte(k), value, m); err != nil {
			return err
		}
	}
	return nil
}

func (s *memStore) Leader() uint64 { return 1 }

func (s *memStore) Revision() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rev, nil
}

// startMirror starts a mirror of st over a 1 MiB region with knobs.
func startMirror(t *testing.T, st Store, knobs Knobs, events Sink) *Mirror {
	t.Helper()
	m, err := New(Config{Region: make([]byte, 1<<20), Table: table.Config{Grace: testGrace},
		Events: events, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Knobs: knobs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	if _, missing, err := m.Start(func() (Store, error) { return st, nil }); err != nil || missing != 0 {
		t.Fatalf("start: %d missing, %v", missing, err)
	}
	return m
}

func pauseRepair() func() bool { return func() bool { return true } }

func TestConfigValidate(t *testing.T) {
	if err := (Config{}).Validate(); err == nil {
		t.Error("a config without a region validated")
	}
	c := Config{Region: make([]byte, 1<<20), Table: table.Config{Grace: -time.Second}}
	if err := c.Validate(); !errors.Is(err, table.ErrBadConfig) {
		t.Errorf("a negative grace: %v, want table.ErrBadConfig", err)
	}
	if c.Table.Grace != -time.Second {
		t.Error("Validate changed the config")
	}
}

// TestStartFillsRegion: Start fills the region from the store, and Get
// answers from it.
func TestStartFillsRegion(t *testing.T) {
	st := newMemStore()
	st.put("a", "1", 3)
	st.put("b", "2", 4)
	m := startMirror(t, st, Knobs{PauseRepair: pauseRepair()}, nil)
	if n := m.Stats().Keys; n != 2 {
		t.Fatalf("%d keys after start, want 2", n)
	}
	v, meta, ok, err := m.Get(context.Background(), []byte("b"))
	if err != nil || !ok || string(v) != "2" || meta != metaFromVersion(4) {
		t.Fatalf("get b: %q@%+v %v %v", v, meta, ok, err)
	}
	if rev := m.Header().Revision; rev != 4 {
		t.Fatalf("header revision %d after start, want the store's, 4", rev)
	}
	if _, _, ok, err := m.Get(context.Background(), []byte("c")); ok || err != nil {
		t.Fatalf("get c: %v %v, want a miss", ok, err)
	}
}

// dropFromRegion makes key one the region lacks (flagged incomplete), as
// an applied write that did not fit does.
func dropFromRegion(m *Mirror, key string) {
	m.tmu.Lock()
	defer m.tmu.Unlock()
	m.tbl.SetIncomplete(true)
	if _, err := m.tbl.Delete([]byte(key)); err != nil {
		panic(err)
	}
	value, _, _, _ := m.store.Get([]byte(key))
	m.noteMissing([]byte(key), len(value))
}

// TestStoreAheadWaitsForBatch: while the store holds a batch the region
// has not applied (BatchAhead), an RPC read of a key the region lacks does
// not answer from the store, and a repair does not copy it from there;
// once the batch is applied both go ahead.
func TestStoreAheadWaitsForBatch(t *testing.T) {
	st := newMemStore()
	st.put("m", "v", 1)
	m := startMirror(t, st, Knobs{PauseRepair: pauseRepair()}, nil)
	dropFromRegion(m, "m")
	m.BatchAhead()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if v, _, ok, err := m.Get(cancelled, []byte("m")); !errors.Is(err, context.Canceled) {
		t.Fatalf("read while the store is ahead by a batch: %q, %v, %v; want it to wait", v, ok, err)
	}
	m.tmu.Lock()
	m.repairLocked()
	_, stillMissing := m.missing["m"]
	m.tmu.Unlock()
	if !stillMissing {
		t.Fatal("a repair copied a key from the store while it was ahead by a batch")
	}
	m.Apply(nil, 1) // the batch's Apply
	if v, _, ok, err := m.Get(cancelled, []byte("m")); err != nil || !ok || string(v) != "v" {
		t.Fatalf("read after the Apply: %q, %v, %v", v, ok, err)
	}
	m.tmu.Lock()
	m.repairLocked()
	_, stillMissing = m.missing["m"]
	m.tmu.Unlock()
	if stillMissing {
		t.Fatal("the repair did not put the key back after the Apply")
	}
}

// TestAtomicApplySteps: a batch marked Atomic is applied as one group:
// withheld, then its PUTs, then its DELETEs; a plain batch is not.
func TestAtomicApplySteps(t *testing.T) {
	st := newMemStore()
	for _, k := range []string{"a", "d"} {
		st.put(k, "old", 1)
	}
	var mu sync.Mutex
	var steps []string
	m := startMirror(t, st, Knobs{PauseRepair: pauseRepair(), AtomicStep: func(step string) {
		mu.Lock()
		steps = append(steps, step)
		mu.Unlock()
	}}, nil)
	st.put("a", "new", 2) // the store commits a batch before its Apply
	st.put("c", "new", 2)
	st.del("d")
	m.Apply([]kv.Write{
		{Meta: revision.Meta{Mod: 2}, Key: []byte("a"), Value: []byte("new"), Atomic: true},
		{Meta: revision.Meta{Mod: 2}, Key: []byte("d"), Deleted: true, Atomic: true},
		{Meta: revision.Meta{Mod: 2}, Key: []byte("c"), Value: []byte("new"), Atomic: true},
	}, 2)
	mu.Lock()
	got := strings.Join(steps, " ")
	steps = nil
	mu.Unlock()
	if got != "withheld a c d" {
		t.Fatalf("atomic apply steps %q, want withheld, the PUTs (a c), the DELETEs (d)", got)
	}
	st.put("a", "x", 3)
	m.Apply([]kv.Write{{Meta: revision.Meta{Mod: 3}, Key: []byte("a"), Value: []byte("x")}}, 3)
	if len(steps) != 0 {
		t.Fatalf("a plain batch went through an atomic group: %v", steps)
	}
	for k, want := range map[string]string{"a": "x", "c": "new"} {
		if v, _, ok, err := m.Get(context.Background(), []byte(k)); err != nil || !ok || string(v) != want {
			t.Errorf("%s = %q %v %v, want %q", k, v, ok, err, want)
		}
	}
	if _, _, ok, _ := m.Get(context.Background(), []byte("d")); ok {
		t.Error("d still found after its delete")
	}
}

// TestLeaseWordWithheldWhileRebuilding: the lease word shows the node's
// lease, and is clear while the region is rebuilt.
func TestLeaseWordWithheldWhileRebuilding(t *testing.T) {
	st := newMemStore()
	st.put("a", "1", 1)
	var inWalk atomic.Bool
	var seen atomic.Uint64
	var m *Mirror
	m = startMirror(t, st, Knobs{PauseRepair: pauseRepair(), WalkKey: func(int) error {
		if inWalk.Load() {
			seen.Store(table.LeaseOf(m.cfg.Region) + 1) // +1: set even when the word is 0
		}
		return nil
	}}, nil)
	if m.LeaseValid() || table.LeaseOf(m.cfg.Region) != 0 {
		t.Fatal("a lease word before any lease")
	}
	m.OnLease(1, time.Now().Add(time.Minute))
	if !m.LeaseValid() || table.LeaseOf(m.cfg.Region) == 0 {
		t.Fatal("no lease word after OnLease")
	}
	inWalk.Store(true)
	m.Restore()
	inWalk.Store(false)
	if seen.Load() != 1 {
		t.Fatalf("lease word %d during the rebuild, want 0", seen.Load()-1)
	}
	if !m.LeaseValid() || table.LeaseOf(m.cfg.Region) == 0 {
		t.Fatal("no lease word after the rebuild")
	}
	m.OnLease(1, time.Time{})
	if m.LeaseValid() || table.LeaseOf(m.cfg.Region) != 0 {
		t.Fatal("a lease word after the lease ended")
	}
}

// TestFailedRebuildRefusesAdmission: while a failed rebuild leaves the
// region partial, the region is flagged incomplete and Reserve refuses
// (ErrRegionPartial); the repair loop reruns the rebuild, and then both
// recover.
func TestFailedRebuildRefusesAdmission(t *testing.T) {
	st := newMemStore()
	for _, k := range []string{"a", "b", "c"} {
		st.put(k, "v", 1)
	}
	var fail atomic.Bool
	m := startMirror(t, st, Knobs{WalkKey: func(i int) error {
		if fail.Load() && i == 1 {
			return errors.New("injected")
		}
		return nil
	}}, nil)
	fail.Store(true)
	m.Restore()
	if !m.Header().Incomplete {
		t.Fatal("a failed rebuild left the region flagged complete")
	}
	if err := m.Reserve([]byte("x"), 1); !errors.Is(err, ErrRegionPartial) {
		t.Fatalf("reserve on a partial region: %v, want ErrRegionPartial", err)
	}
	fail.Store(false)
	wait.For(t, "the region to become complete once rebuilds work again", func() bool { return !m.Header().Incomplete })
	if err := m.Reserve([]byte("x"), 1); err != nil {
		t.Fatalf("reserve after the rebuild: %v", err)
	}
	m.Unreserve([]byte("x"), 1)
	if n := m.Stats().Keys; n != 3 {
		t.Fatalf("%d keys after the rebuild, want 3", n)
	}
}

// TestReserveAllIsAllOrNothing: ReserveAll either reserves every write or
// none, and counts a refusal.
func TestReserveAllIsAllOrNothing(t *testing.T) {
	m := startMirror(t, newMemStore(), Knobs{PauseRepair: pauseRepair()}, nil)
	before := m.Stats()
	release, err := m.ReserveAll([]Put{{Key: []byte("a"), ValueLen: 100}, {Key: []byte("b"), ValueLen: 1 << 30}})
	if err == nil {
		release()
		t.Fatal("a reservation beyond the region was made")
	}
	if st := m.Stats(); st.BytesReserved != before.BytesReserved || st.SlotsHeld != before.SlotsHeld {
		t.Fatalf("a refused ReserveAll left reservations: %+v", st)
	}
	release, err = m.ReserveAll([]Put{{Key: []byte("a"), ValueLen: 100}, {Key: []byte("b"), ValueLen: 100}})
	if err != nil {
		t.Fatal(err)
	}
	if st := m.Stats(); st.SlotsHeld != before.SlotsHeld+2 {
		t.Fatalf("slots held %d after reserving two new keys, want %d", st.SlotsHeld, before.SlotsHeld+2)
	}
	release()
	if st := m.Stats(); st.BytesReserved != before.BytesReserved || st.SlotsHeld != before.SlotsHeld {
		t.Fatalf("release left reservations: %+v", st)
	}
}

// sink records what Events publishes.
type sink struct {
	evs   []wire.WatchEvent
	index uint64
	reset bool
}

func (s *sink) Publish(evs []wire.WatchEvent, applied uint64) {
	for _, e := range evs {
		e.Key, e.Value = slices.Clone(e.Key), slices.Clone(e.Value)
		s.evs = append(s.evs, e)
	}
	s.index = applied
}

func (s *sink) Reset(index uint64) { s.index, s.reset = index, true }

// TestEventsPublished: every applied write reaches the sink as an event,
// in order; a reset is passed on.
func TestEventsPublished(t *testing.T) {
	var sk sink
	m := startMirror(t, newMemStore(), Knobs{PauseRepair: pauseRepair()}, &sk)
	m.Events([]kv.Write{
		{Meta: revision.Meta{Mod: 5}, Key: []byte("a"), Value: []byte("1")},
		{Meta: revision.Meta{Mod: 6}, Key: []byte("a"), Deleted: true},
	}, 6, false)
	want := []wire.WatchEvent{
		{Type: wire.EventPut, Key: []byte("a"), Value: []byte("1"), Version: 5},
		{Type: wire.EventDelete, Key: []byte("a"), Version: 6},
	}
	if len(sk.evs) != 2 || sk.index != 6 {
		t.Fatalf("events %+v at %d", sk.evs, sk.index)
	}
	for i, e := range sk.evs {
		w := want[i]
		if e.Type != w.Type || string(e.Key) != string(w.Key) || string(e.Value) != string(w.Value) || e.Version != w.Version {
			t.Errorf("event %d: %+v, want %+v", i, e, w)
		}
	}
	m.Events(nil, 10, true)
	if !sk.reset || sk.index != 10 {
		t.Fatalf("reset not passed on: %+v", sk)
	}
}

// metaFromVersion is the metadata of a key written once, at version.
func metaFromVersion(version uint64) revision.Meta {
	return revision.Meta{Create: version, Mod: version, Version: 1}
}
