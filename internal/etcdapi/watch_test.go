package etcdapi_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/etcdapi"
)

// put writes through kvd's own client (the KV service is not this
// file's) and returns the write's revision in etcd's numbering: kvd's + 1.
func (e *env) put(t testing.TB, key, value string, opts ...client.WriteOption) int64 {
	t.Helper()
	rev, err := e.kvd.PutRevision(context.Background(), []byte(key), []byte(value), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return int64(rev) + 1
}

func (e *env) del(t testing.TB, key string) {
	t.Helper()
	if err := e.kvd.Delete(context.Background(), []byte(key)); err != nil {
		t.Fatal(err)
	}
}

// nextWatch is the next response of wc, failing the test if none comes soon.
func nextWatch(t testing.TB, wc clientv3.WatchChan) clientv3.WatchResponse {
	t.Helper()
	select {
	case r, ok := <-wc:
		if !ok {
			t.Fatal("watch channel closed")
		}
		return r
	case <-time.After(20 * time.Second):
		t.Fatal("no watch response")
	}
	panic("unreachable")
}

// collectEvents reads events from wc until it has n of them.
func collectEvents(t testing.TB, wc clientv3.WatchChan, n int) []*clientv3.Event {
	t.Helper()
	var evs []*clientv3.Event
	for len(evs) < n {
		r := nextWatch(t, wc)
		if err := r.Err(); err != nil {
			t.Fatalf("watch ended: %v", err)
		}
		evs = append(evs, r.Events...)
	}
	return evs
}

func eventKeys(evs []*clientv3.Event) []string {
	var ks []string
	for _, ev := range evs {
		ks = append(ks, fmt.Sprintf("%s %s", ev.Type, ev.Kv.Key))
	}
	return ks
}

func TestWatchKeySeesPutsAndDeletesWithEtcdsMetadata(t *testing.T) {
	e := start(t, 1, etcdapi.Config{})
	ctx := t.Context()
	wc := e.etcd.Watch(ctx, "k")
	r1 := e.put(t, "k", "v1")
	r2 := e.put(t, "k", "v2")
	e.del(t, "k")
	e.put(t, "other", "x")
	evs := collectEvents(t, wc, 3)
	if len(evs) != 3 {
		t.Fatalf("events %v, want 3", eventKeys(evs))
	}
	create, modify, del := evs[0], evs[1], evs[2]
	if !create.IsCreate() || string(create.Kv.Value) != "v1" || create.Kv.ModRevision != r1 || create.Kv.Version != 1 {
		t.Errorf("first event %+v: want a create of v1 at %d", create.Kv, r1)
	}
	if !modify.IsModify() || modify.Kv.CreateRevision != r1 || modify.Kv.ModRevision != r2 || modify.Kv.Version != 2 {
		t.Errorf("second event %+v: want a modify at %d of the key created at %d, version 2", modify.Kv, r2, r1)
	}
	if del.Type != mvccpb.DELETE || string(del.Kv.Key) != "k" || del.Kv.ModRevision <= r2 {
		t.Errorf("third event %v %+v: want the delete", del.Type, del.Kv)
	}
}

func TestWatchRangesFollowEtcdsConventions(t *testing.T) {
	e := start(t, 1, etcdapi.Config{})
	keys := []string{"a", "ab", "abc", "b", "ba", "c", "d"}
	for _, tc := range []struct {
		name string
		key  string
		opts []clientv3.OpOption
		want []string
	}{
		{"key", "ab", nil, []string{"ab"}},
		{"prefix", "a", []clientv3.OpOption{clientv3.WithPrefix()}, []string{"a", "ab", "abc"}},
		{"range", "ab", []clientv3.OpOption{clientv3.WithRange("ba")}, []string{"ab", "abc", "b"}},
		{"range across prefixes", "abc", []clientv3.OpOption{clientv3.WithRange("c")}, []string{"abc", "b", "ba"}},
		{"from key", "b", []clientv3.OpOption{clientv3.WithFromKey()}, []string{"b", "ba", "c", "d", "zz-end"}},
		{"every key", "", []clientv3.OpOption{clientv3.WithFromKey()}, append(slices.Clone(keys), "zz-end")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			wc := e.etcd.Watch(ctx, tc.key, tc.opts...)
			for _, k := range keys {
				e.put(t, k, "v")
			}
			// A last write the bounded ranges leave out: a key they
			// wrongly took would arrive before it. The open ranges
			// include it, so that it never comes after what they collect.
			e.put(t, "zz-end", "v")
			var got []string
			for _, ev := range collectEvents(t, wc, len(tc.want)) {
				got = append(got, string(ev.Kv.Key))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("watched keys %q, want %q", got, tc.want)
			}
		})
	}
}

func TestWatchEmptyRangeIsRefusedWithEtcdsReason(t *testing.T) {
	e := start(t, 1, etcdapi.Config{})
	wc := e.etcd.Watch(t.Context(), "b", clientv3.WithRange("a"))
	r, ok := <-wc
	if ok && r.Err() == nil {
		t.Fatalf("watch of an empty range answered %+v, want it refused", r)
	}
}

func TestWatchFromPastRevisionReplaysHistory(t *testing.T) {
	e := start(t, 1, etcdapi.Config{})
	e.put(t, "h/0", "before")
	first := e.put(t, "h/1", "a")
	e.put(t, "h/2", "b")
	e.del(t, "h/1")
	wc := e.etcd.Watch(t.Context(), "h/", clientv3.WithPrefix(), clientv3.WithRev(first))
	got := eventKeys(collectEvents(t, wc, 3))
	want := []string{"PUT h/1", "PUT h/2", "DELETE h/1"}
	if !slices.Equal(got, want) {
		t.Errorf("replayed %q, want %q", got, want)
	}
}

func TestWatchPrevKVAndFilters(t *testing.T) {
	e := start(t, 1, etcdapi.Config{})
	for _, tc := range []struct {
		name     string
		opts     []clientv3.OpOption
		want     []string
		wantPrev bool
	}{
		{"prev_kv", []clientv3.OpOption{clientv3.WithPrevKV()}, []string{"PUT f", "PUT f", "DELETE f"}, true},
		{"no prev_kv", nil, []string{"PUT f", "PUT f", "DELETE f"}, false},
		{"no put", []clientv3.OpOption{clientv3.WithFilterPut()}, []string{"DELETE f"}, false},
		{"no delete", []clientv3.OpOption{clientv3.WithFilterDelete()}, []string{"PUT f", "PUT f"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			wc := e.etcd.Watch(ctx, "f", tc.opts...)
			e.put(t, "f", "1")
			e.put(t, "f", "2")
			e.del(t, "f")
			e.put(t, "g", "end")
			evs := collectEvents(t, wc, len(tc.want))
			if got := eventKeys(evs); !slices.Equal(got, tc.want) {
				t.Fatalf("events %q, want %q", got, tc.want)
			}
			for i, ev := range evs {
				hasPrev := ev.PrevKv != nil
				wantPrev := tc.wantPrev && !(i == 0 && ev.Type == mvccpb.PUT)
				if hasPrev != wantPrev {
					t.Errorf("event %d prev_kv %v, want present %v", i, ev.PrevKv, wantPrev)
				}
			}
			if tc.wantPrev && (string(evs[1].PrevKv.Value) != "1" || string(evs[2].PrevKv.Value) != "2") {
				t.Errorf("prev values %q %q, want 1 and 2", evs[1].PrevKv.Value, evs[2].PrevKv.Value)
			}
		})
	}
}

func TestWatchManyOnOneStream(t *testing.T) {
	e := start(t, 1, etcdapi.Config{})
	ctx := t.Context() // one context: clientv3 puts every watch on one stream
	const n = 20
	wcs := make([]clientv3.WatchChan, n)
	for i := range wcs {
		wcs[i] = e.etcd.Watch(ctx, fmt.Sprintf("m/%02d", i))
	}
	for i := range wcs {
		e.put(t, fmt.Sprintf("m/%02d", i), fmt.Sprint(i))
	}
	for i, wc := range wcs {
		evs := collectEvents(t, wc, 1)
		if got := string(evs[0].Kv.Key); got != fmt.Sprintf("m/%02d", i) || len(evs) != 1 {
			t.Errorf("watch %d got %q", i, eventKeys(evs))
		}
	}
}

func TestWatchCancelClosesChannel(t *testing.T) {
	e := start(t, 1, etcdapi.Config{})
	ctx, cancel := context.WithCancel(t.Context())
	wc := e.etcd.Watch(ctx, "c")
	e.put(t, "c", "1")
	collectEvents(t, wc, 1)
	cancel()
	for range wc { // drains, then closes
	}
	// The stream's other watches go on.
	wc2 := e.etcd.Watch(t.Context(), "c")
	e.put(t, "c", "2")
	if evs := collectEvents(t, wc2, 1); string(evs[0].Kv.Value) != "2" {
		t.Errorf("after a cancel, a new watch got %q", eventKeys(evs))
	}
}

func TestWatchRequestProgressAnswersAtTheStoreRevision(t *testing.T) {
	e := start(t, 1, etcdapi.Config{})
	ctx := t.Context()
	wc := e.etcd.Watch(ctx, "quiet", clientv3.WithProgressNotify())
	wc2 := e.etcd.Watch(ctx, "quiet2")
	rev := e.put(t, "busy", "x") // no event for either watch
	if err := e.etcd.RequestProgress(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range []clientv3.WatchChan{wc, wc2} {
		for {
			r := nextWatch(t, c)
			if !r.IsProgressNotify() {
				t.Fatalf("response %+v, want a progress notification", r)
			}
			if r.Header.Revision >= rev {
				break // an earlier one may come first from the progress_notify watch
			}
		}
	}
}

// TestWatchCompactedRevisionEndsWithErrCompacted: a watch from below the
// compaction revision ends with ErrCompacted naming the compaction
// revision (compact_revision) at header revision 0, as etcd's. One from
// compact_revision, as clientv3's users resume, gets what etcd's gets
// once its compaction has run: that revision's puts without prev_kv (the
// revision before is compacted), not its deletes (the compaction dropped
// them), then every later write. Checked against a real etcd too.
func TestWatchCompactedRevisionEndsWithErrCompacted(t *testing.T) {
	againstKvdAndEtcd(t, watchFromCompaction)
}

func watchFromCompaction(t *testing.T, c *clientv3.Client) {
	ctx := t.Context()
	first := put(t, c, "wc/a", "1")
	put(t, c, "wc/b", "1")
	// One revision holds a put and a delete.
	tr, err := c.Txn(ctx).Then(clientv3.OpPut("wc/a", "2"), clientv3.OpDelete("wc/b")).Commit()
	if err != nil {
		t.Fatal(err)
	}
	compacted := tr.Header.Revision
	if _, err := c.Compact(ctx, compacted, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	wc := c.Watch(ctx, "wc/", clientv3.WithPrefix(), clientv3.WithRev(first))
	r := nextWatch(t, wc)
	if !errors.Is(r.Err(), rpctypes.ErrCompacted) || r.CompactRevision != compacted {
		t.Fatalf("watch from compacted revision %d: %+v err %v, want ErrCompacted with compact_revision %d", first, r, r.Err(), compacted)
	}
	if r.Header.Revision != 0 {
		t.Errorf("compacted watch's header %v: want etcd's, at no revision (0)", r.Header)
	}
	if _, ok := <-wc; ok {
		t.Error("channel still open after the compacted response")
	}
	wc = c.Watch(ctx, "wc/", clientv3.WithPrefix(), clientv3.WithRev(r.CompactRevision), clientv3.WithPrevKV())
	later := put(t, c, "wc/c", "3")
	var got []string
	for _, ev := range collectEvents(t, wc, 2) {
		got = append(got, fmt.Sprintf("%s %s=%s @%d prev=%v", ev.Type, ev.Kv.Key, ev.Kv.Value, ev.Kv.ModRevision, ev.PrevKv != nil))
	}
	want := []string{fmt.Sprintf("PUT wc/a=2 @%d prev=false", compacted), fmt.Sprintf("PUT wc/c=3 @%d prev=false", later)}
	if !slices.Equal(got, want) {
		t.Errorf("watch from compact_revision %d: %q, want %q", r.CompactRevision, got, want)
	}
}

func TestWatchSeesLeaseRevokeDeletes(t *testing.T) {
	e := start(t, 1, etcdapi.Config{})
	ctx := t.Context()
	lease, err := e.etcd.Grant(ctx, 30)
	if err != nil {
		t.Fatal(err)
	}
	wc := e.etcd.Watch(ctx, "leased/", clientv3.WithPrefix())
	e.put(t, "leased/a", "1", client.WithLease(client.LeaseID(lease.ID)))
	e.put(t, "leased/b", "1", client.WithLease(client.LeaseID(lease.ID)))
	if _, err := e.etcd.Revoke(ctx, lease.ID); err != nil {
		t.Fatal(err)
	}
	got := eventKeys(collectEvents(t, wc, 4))
	slices.Sort(got[2:])
	if want := []string{"PUT leased/a", "PUT leased/b", "DELETE leased/a", "DELETE leased/b"}; !slices.Equal(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
}

// TestWatchEventsCarryTheKeysLease: a PUT event's kv has the lease the
// write attached (0 once a write detaches it), a DELETE's none, as etcd's;
// with prev_kv, the previous kv has the lease it had.
func TestWatchEventsCarryTheKeysLease(t *testing.T) {
	e := start(t, 1, etcdapi.Config{})
	ctx := t.Context()
	lease, err := e.etcd.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	first, err := e.etcd.Put(ctx, "l", "1", clientv3.WithLease(lease.ID))
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range []clientv3.Op{
		clientv3.OpPut("l", "2", clientv3.WithLease(lease.ID)),
		clientv3.OpPut("l", "3"),
		clientv3.OpPut("l", "4", clientv3.WithLease(lease.ID)),
		clientv3.OpDelete("l"),
	} {
		if _, err := e.etcd.Do(ctx, op); err != nil {
			t.Fatal(err)
		}
	}
	evs := collectEvents(t, e.etcd.Watch(ctx, "l", clientv3.WithRev(first.Header.Revision), clientv3.WithPrevKV()), 5)
	var got []string
	for _, ev := range evs {
		line := fmt.Sprintf("%s %s version %d lease %x", ev.Type, ev.Kv.Value, ev.Kv.Version, ev.Kv.Lease)
		if ev.PrevKv != nil {
			line += fmt.Sprintf(" prev lease %x", ev.PrevKv.Lease)
		}
		got = append(got, line)
	}
	l := int64(lease.ID)
	want := []string{
		fmt.Sprintf("PUT 1 version 1 lease %x", l),
		fmt.Sprintf("PUT 2 version 2 lease %x prev lease %x", l, l),
		fmt.Sprintf("PUT 3 version 3 lease 0 prev lease %x", l),
		fmt.Sprintf("PUT 4 version 4 lease %x prev lease 0", l),
		fmt.Sprintf("DELETE  version 0 lease 0 prev lease %x", l),
	}
	if !slices.Equal(got, want) {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
