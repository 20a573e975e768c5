package table

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// view is what a one-sided reader can accept for a key of a group right
// now: its value from before the group, from after it, or nothing (a
// retry).
type view int

const (
	viewBefore view = iota
	viewAfter
	viewRetry
)

func (v view) String() string { return [...]string{"before", "after", "retry"}[v] }

// groupKey is one key of a group and its two states (version 0: absent).
type groupKey struct {
	key           string
	before, after uint64
}

// readerView classifies what lookup (a reader's READs, done now) accepts
// for k.
func readerView(t *testing.T, mem []byte, k groupKey) view {
	t.Helper()
	_, version, err := lookup(mem, []byte(k.key))
	switch {
	case errors.Is(err, ErrHidden):
		return viewRetry
	case errors.Is(err, errMiss):
		version = 0
	case err != nil:
		t.Fatalf("%s: %v", k.key, err)
	}
	switch version {
	case k.before:
		return viewBefore
	case k.after:
		return viewAfter
	}
	t.Fatalf("%s: reader accepts version %d, neither before (%d) nor after (%d)", k.key, version, k.before, k.after)
	return viewRetry
}

// torn reports a moment at which one key reads as before the group and
// another as after it: two readers, one after the other, could see half of
// the group.
func torn(t *testing.T, mem []byte, keys []groupKey) string {
	var before, after []string
	for _, k := range keys {
		switch readerView(t, mem, k) {
		case viewBefore:
			before = append(before, k.key)
		case viewAfter:
			after = append(after, k.key)
		}
	}
	if len(before) > 0 && len(after) > 0 {
		return fmt.Sprintf("%v read as before the group while %v read as after it", before, after)
	}
	return ""
}

// applyGroup writes a group at version 9 as internal/mirror/atomic.go does, with
// deletesFirst reversing the documented order of puts and deletes, and
// returns the first torn moment it finds after any write.
func applyGroup(t *testing.T, deletesFirst bool, size int, cfg Config) (string, *Table, []byte, []groupKey) {
	tab, mem, _ := newTable(t, size, cfg)
	for _, k := range []string{"a", "b", "d", "e"} {
		if err := tab.Put([]byte(k), []byte("old"), mv(1)); err != nil {
			t.Fatal(err)
		}
	}
	// a and b are updated, c is created, d and e are deleted.
	keys := []groupKey{{"a", 1, 9}, {"b", 1, 9}, {"c", 0, 9}, {"d", 1, 0}, {"e", 1, 0}}
	check := func(step string) string {
		if why := torn(t, mem, keys); why != "" {
			return step + ": " + why
		}
		return ""
	}
	tab.BeginAtomic()
	for _, k := range keys {
		tab.Withhold([]byte(k.key))
		if why := check("withhold " + k.key); why != "" {
			return why, tab, mem, keys
		}
	}
	puts := func() string {
		for _, k := range keys[:3] {
			if err := tab.Put([]byte(k.key), []byte("new"), mv(9)); err != nil {
				t.Fatal(err)
			}
			if why := check("put " + k.key); why != "" {
				return why
			}
		}
		return ""
	}
	del := func() string {
		for _, k := range keys[3:] {
			if _, err := tab.Delete([]byte(k.key)); err != nil {
				t.Fatal(err)
			}
			if why := check("delete " + k.key); why != "" {
				return why
			}
		}
		return ""
	}
	steps := []func() string{puts, del}
	if deletesFirst {
		steps = []func() string{del, puts}
	}
	for _, step := range steps {
		if why := step(); why != "" {
			return why, tab, mem, keys
		}
	}
	tab.EndAtomic()
	return check("end"), tab, mem, keys
}

// TestAtomicGroupNeverTorn: while a group of updates, a new key and two
// deletes is written, no moment lets one key read as before the group and
// another as after it; once it ends, every key reads as after.
func TestAtomicGroupNeverTorn(t *testing.T) {
	t.Parallel()
	forInlineModes(t, Config{Buckets: 64}, func(t *testing.T, cfg Config, grow func(int) int) {
		atomicGroupNeverTorn(t, grow(1<<20), cfg)
	})
}

func atomicGroupNeverTorn(t *testing.T, size int, cfg Config) {
	why, tab, mem, keys := applyGroup(t, false, size, cfg)
	if why != "" {
		t.Fatal(why)
	}
	for _, k := range keys {
		if v := readerView(t, mem, k); v != viewAfter {
			t.Errorf("%s reads %v after the group ended", k.key, v)
		}
	}
	if tab.atomic || len(tab.groupEnds) != 0 {
		t.Error("the group is still open after EndAtomic")
	}
}

// TestAtomicGroupOrderMatters: the check above can fail: a delete applied
// before the group's puts shows the group's "after" (a miss) while a key
// still reads as before it (c, not yet created).
func TestAtomicGroupOrderMatters(t *testing.T) {
	t.Parallel()
	forInlineModes(t, Config{Buckets: 64}, func(t *testing.T, cfg Config, grow func(int) int) {
		why, _, _, _ := applyGroup(t, true, grow(1<<20), cfg)
		if !strings.Contains(why, "[c] read as before the group while [d] read as after it") {
			t.Fatalf("deletes first: %q, want c before while d after", why)
		}
	})
}

// TestAtomicGroupEdges: a withheld key the group does not write comes back
// live; Compact waits until the group ends; a Reset closes it.
func TestAtomicGroupEdges(t *testing.T) {
	t.Parallel()
	tab, mem, clk := newTable(t, 64<<10, Config{Buckets: 64, Grace: time.Millisecond})
	if err := tab.Put([]byte("k"), []byte("v"), mv(1)); err != nil {
		t.Fatal(err)
	}
	tab.BeginAtomic()
	tab.Withhold([]byte("k"))
	tab.Withhold([]byte("absent")) // nothing to hide
	if _, _, err := lookup(mem, []byte("k")); !errors.Is(err, ErrHidden) {
		t.Fatalf("withheld record reads %v, want ErrHidden", err)
	}
	// Fill the area, then free every other record: free space is cut up,
	// so a compaction would move records.
	n := 0
	for ; tab.Put([]byte(fmt.Sprint("f", n)), make([]byte, 200), mv(2)) == nil; n++ {
	}
	for i := 0; i < n; i += 2 {
		if _, err := tab.Delete([]byte(fmt.Sprint("f", i))); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(time.Second)
	if !tab.Fragmented() {
		t.Fatal("setup: free space is not fragmented")
	}
	if n := tab.Compact(1 << 20); n != 0 {
		t.Fatalf("Compact moved %d bytes inside an atomic group", n)
	}
	tab.EndAtomic()
	if v, ver, err := lookup(mem, []byte("k")); err != nil || string(v) != "v" || ver != 1 {
		t.Fatalf("withheld, unwritten key after the group: %q,%d,%v", v, ver, err)
	}
	if _, _, err := lookup(mem, []byte("f1")); err != nil {
		t.Fatalf("a group Put is not live after the group: %v", err)
	}
	if n := tab.Compact(1 << 20); n == 0 {
		t.Fatal("Compact did nothing after the group ended")
	}
	tab.BeginAtomic()
	tab.Reset()
	if tab.atomic {
		t.Fatal("Reset left the group open")
	}
	if err := tab.Put([]byte("k"), []byte("v2"), mv(3)); err != nil {
		t.Fatal(err)
	}
	if err := tab.Reveal(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := lookup(mem, []byte("k")); err != nil {
		t.Fatalf("a Put after Reset is not live after Reveal: %v", err)
	}
}

// TestConcurrentReadersSeeWholeGroups: a writer updates pairs of keys in
// atomic groups (both at the group's version) while readers read one key
// of a pair and then the other, as two GETs one after the other: the
// second never shows an older version than the first. Run with -race.
func TestConcurrentReadersSeeWholeGroups(t *testing.T) {
	t.Parallel()
	const grace = 200 * time.Millisecond // the writer's clock moves 1ms per group
	forInlineModes(t, Config{Buckets: 256, Grace: grace}, func(t *testing.T, cfg Config, grow func(int) int) {
		readersSeeWholeGroups(t, grow(2<<20), cfg)
	})
}

// groupGet is the GET of readersSeeWholeGroups: layout 2's reader without
// arenas, layout 3's (inlineGet) with them.
func groupGet(mem []byte, clk *fakeClock, cfg Config, key, buf []byte, r *rand.Rand) (version uint64, res readResult, late bool) {
	if cfg.InlineMax == 0 {
		_, version, res, late = clientGet(mem, clk, cfg.Grace, key, buf)
		return version, res, late
	}
	got, late := inlineGet(mem, clk, key, -1, buf, r)
	return got.version, got.res, late
}

func readersSeeWholeGroups(t *testing.T, size int, cfg Config) {
	const pairs, readers, groups = 8, 2, 20000
	tab, mem, clk := newTable(t, size, cfg)
	value := expectedValue
	if cfg.InlineMax > 0 {
		value = smallValue
	}
	key := func(p, i int) []byte { return []byte(fmt.Sprintf("p%d-%d", p, i)) }
	var done atomic.Bool
	var checked atomic.Int64
	var wg sync.WaitGroup
	for id := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(id), 7))
			buf := make([]byte, MaxRecord)
			for !done.Load() {
				p, first := r.IntN(pairs), r.IntN(2)
				v1, res1, late1 := groupGet(mem, clk, cfg, key(p, first), buf, r)
				if res1 != readHit || late1 {
					continue
				}
				v2, res2, late2 := groupGet(mem, clk, cfg, key(p, 1-first), buf, r)
				if late2 {
					continue
				}
				if res2 == readHit && v2 < v1 {
					t.Errorf("reader %d: %s at version %d, then %s at older version %d: half a group", id, key(p, first), v1, key(p, 1-first), v2)
					return
				}
				if res2 == readHit {
					checked.Add(1)
				}
			}
		}()
	}
	r := rand.New(rand.NewPCG(3, 4))
	var werr error
	for v := uint64(1); v <= groups && werr == nil; v++ {
		clk.Advance(time.Millisecond)
		p := r.IntN(pairs)
		tab.BeginAtomic()
		tab.Withhold(key(p, 0))
		tab.Withhold(key(p, 1))
		for i := range 2 {
			if werr == nil {
				werr = tab.Put(key(p, i), value(string(key(p, i)), v), mv(v))
			}
		}
		tab.EndAtomic()
	}
	done.Store(true)
	wg.Wait()
	if werr != nil {
		t.Fatal(werr)
	}
	t.Logf("%d pairs of reads checked", checked.Load())
	if checked.Load() == 0 {
		t.Fatal("no pair of reads was checked")
	}
}
