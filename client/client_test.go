package client_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
	"github.com/kvd-project/kvd/transport"
	"github.com/kvd-project/kvd/transport/tcp"
)

// countingTransport counts the one-sided READ batches (network round trips),
// the READs in them and the bytes they fetch, and the messages its
// connections issue.
type countingTransport struct {
	transport.Transport
	reads, ops, bytes, sends atomic.Int64
}

type countingConn struct {
	transport.Conn
	t *countingTransport
}

func (c *countingTransport) Dial(ctx context.Context, addr string) (transport.Conn, error) {
	conn, err := c.Transport.Dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: conn, t: c}, nil
}

func (c *countingConn) Read(ctx context.Context, ops []transport.ReadOp) error {
	c.t.reads.Add(1)
	c.t.ops.Add(int64(len(ops)))
	for _, op := range ops {
		c.t.bytes.Add(int64(len(op.Dst)))
	}
	return c.Conn.Read(ctx, ops)
}

func (c *countingConn) Send(ctx context.Context, msg []byte) error {
	c.t.sends.Add(1)
	return c.Conn.Send(ctx, msg)
}

func newCountingClient(t *testing.T, eps []string) (*client.Client, *countingTransport) {
	t.Helper()
	tr, err := tcp.New(tcp.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ct := &countingTransport{Transport: tr}
	c, err := client.New(client.Config{Endpoints: eps, Transport: ct, AttemptTimeout: 10 * time.Second, RequestTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); tr.Close() })
	return c, ct
}

func TestGetRoundTrips(t *testing.T) {
	nodes := kvdtest.StartCluster(t, 1, kvdtest.Options{})
	kvdtest.WaitLeader(t, nodes, 10*time.Second)
	c, ct := newCountingClient(t, kvdtest.Endpoints(nodes))
	ctx := context.Background()
	if err := c.Put(ctx, []byte("k"), []byte("v1")); err != nil {
		t.Fatal(err)
	}
	// Warm the connection (dial, hello, geometry) so only GETs are counted.
	if _, err := c.Get(ctx, []byte("warm")); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("warm-up get: %v", err)
	}

	for _, tc := range []struct {
		name      string
		key       string
		want      string
		wantErr   error
		maxRounds int64
	}{
		{"uncached hit", "k", "v1", nil, 2},
		{"cached hit", "k", "v1", nil, 2}, // out of place here: the cached bucket, then the record
		{"miss", "nope", "", client.ErrNotFound, 2},
	} {
		r0, s0 := ct.reads.Load(), ct.sends.Load()
		v, err := c.Get(ctx, []byte(tc.key))
		if !errors.Is(err, tc.wantErr) || string(v) != tc.want {
			t.Fatalf("%s: got %q, %v; want %q, %v", tc.name, v, err, tc.want, tc.wantErr)
		}
		reads, sends := ct.reads.Load()-r0, ct.sends.Load()-s0
		if sends != 0 {
			t.Errorf("%s: GET sent %d messages; a one-sided GET sends none", tc.name, sends)
		}
		if reads > tc.maxRounds || reads == 0 {
			t.Errorf("%s: GET took %d READ round trips, want 1..%d", tc.name, reads, tc.maxRounds)
		}
	}

	// A cached location must not yield the value a later acknowledged PUT
	// replaced.
	if err := c.Put(ctx, []byte("k"), []byte("v2-longer")); err != nil {
		t.Fatal(err)
	}
	r0 := ct.reads.Load()
	if v, err := c.Get(ctx, []byte("k")); err != nil || string(v) != "v2-longer" {
		t.Fatalf("after overwrite: got %q, %v", v, err)
	}
	// The cached read finds the old record dead (1 round trip), then the
	// key is read afresh (2).
	if n := ct.reads.Load() - r0; n > 3 {
		t.Errorf("stale cache cost %d round trips, want <= 3", n)
	}
}

func TestErrors(t *testing.T) {
	nodes := kvdtest.StartCluster(t, 1, kvdtest.Options{TableMem: 256 << 10})
	kvdtest.WaitLeader(t, nodes, 10*time.Second)
	c, _ := newCountingClient(t, kvdtest.Endpoints(nodes))
	ctx := context.Background()

	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"get missing", get(c, "missing"), client.ErrNotFound},
		{"delete missing", c.Delete(ctx, []byte("missing")), client.ErrNotFound},
		{"empty key put", c.Put(ctx, nil, []byte("v")), client.ErrEmptyKey},
		{"empty key get", get(c, ""), client.ErrEmptyKey},
		{"key too large", c.Put(ctx, bytes.Repeat([]byte("k"), client.MaxKey+1), nil), client.ErrKeyTooLarge},
		{"value too large", c.Put(ctx, []byte("k"), make([]byte, client.MaxValue+1)), client.ErrValueTooLarge},
	} {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, tc.err, tc.want)
		}
	}

	// Fill the small table: PUTs fail with ErrNoSpace, and everything stored
	// before stays readable.
	stored := map[string]string{}
	val := strings.Repeat("x", 4000)
	var full error
	for i := 0; i < 1000 && full == nil; i++ {
		k := "fill-" + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676))
		if full = c.Put(ctx, []byte(k), []byte(val+k)); full == nil {
			stored[k] = val + k
		}
	}
	if !errors.Is(full, client.ErrNoSpace) {
		t.Fatalf("filling the table: got %v after %d keys, want ErrNoSpace", full, len(stored))
	}
	for k, v := range stored {
		got, err := c.Get(ctx, []byte(k))
		if err != nil || string(got) != v {
			t.Fatalf("after the table filled, %s: got %d bytes, %v", k, len(got), err)
		}
	}
	// Deleting frees space for new writes (once the grace period passes).
	for k := range stored {
		if err := c.Delete(ctx, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	wait.For(t, "a put to get the deleted records' space", func() bool {
		err := c.Put(ctx, []byte("after-free"), []byte(val))
		if err != nil && !errors.Is(err, client.ErrNoSpace) {
			t.Fatalf("put after deletes: %v", err)
		}
		return err == nil
	})

	// An endpoint nobody listens on: ErrUnavailable once the deadline passes.
	dead, err := client.New(client.Config{Endpoints: kvdtest.FreeAddrs(t, 1), DialTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	sctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if err := dead.Put(sctx, []byte("k"), []byte("v")); !errors.Is(err, client.ErrUnavailable) {
		t.Fatalf("dead endpoint put: %v, want ErrUnavailable", err)
	}
	if _, err := client.New(client.Config{}); err == nil {
		t.Fatal("client without endpoints accepted")
	}
}

func get(c *client.Client, k string) error {
	_, err := c.Get(context.Background(), []byte(k))
	return err
}

func TestCollector(t *testing.T) {
	nodes := kvdtest.StartCluster(t, 1, kvdtest.Options{})
	kvdtest.WaitLeader(t, nodes, 10*time.Second)
	c, _ := newCountingClient(t, kvdtest.Endpoints(nodes))
	if err := c.Put(context.Background(), []byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := c.Get(context.Background(), []byte("k")); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c.Collector())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			got[mf.GetName()] += m.GetCounter().GetValue()
		}
	}
	if got["kvd_client_gets_total"] != 3 {
		t.Fatalf("kvd_client_gets_total = %v, want 3 (all: %v)", got["kvd_client_gets_total"], got)
	}
	if r := got["kvd_client_get_round_trips_total"]; r < 3 || r > 6 {
		t.Fatalf("round trips for 3 GETs = %v, want 3..6", r)
	}
	if _, ok := got["kvd_client_get_retries_total"]; !ok {
		t.Fatal("no kvd_client_get_retries_total series")
	}
}

// TestConsistencyLevels: linearizable and serializable GETs are one-sided
// (no message sent), readindex is an RPC (no READ); a client that knows only
// a follower finds the leader for linearizable reads.
func TestConsistencyLevels(t *testing.T) {
	nodes := kvdtest.StartCluster(t, 3, kvdtest.Options{})
	leader := kvdtest.WaitLeader(t, nodes, 10*time.Second)
	var follower *kvdtest.Node
	for _, n := range nodes {
		if n != leader {
			follower = n
		}
	}
	w, _ := newCountingClient(t, kvdtest.Endpoints(nodes))
	if err := w.Put(context.Background(), []byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	c, ct := newCountingClient(t, []string{follower.Addr})
	for _, tc := range []struct {
		level    client.Consistency
		oneSided bool
	}{
		{client.Linearizable, true},
		{client.Serializable, true},
		{client.ReadIndex, false},
	} {
		// Warm up (connections, leader discovery), then count one GET.
		wait.For(t, "a warm-up GET to succeed", func() bool {
			_, err := c.Get(context.Background(), []byte("k"), client.WithConsistency(tc.level))
			return err == nil
		})
		// A one-sided level is shown one-sided by one GET answered by READs
		// alone (the client's stats: no RPC GET). On a busy machine a lease
		// can lapse for a moment, when a GET rightly falls back to RPC; so
		// up to 50 tries. ReadIndex must be an RPC every time.
		var reads, rpcs uint64
		for try := 0; try < 50; try++ {
			r0, s0 := ct.reads.Load(), c.Stats()
			v, err := c.Get(context.Background(), []byte("k"), client.WithConsistency(tc.level))
			if err != nil || string(v) != "v" {
				t.Fatalf("%v: got %q, %v", tc.level, v, err)
			}
			s1 := c.Stats()
			reads, rpcs = uint64(ct.reads.Load()-r0), s1.RPCGets-s0.RPCGets
			if !tc.oneSided || (rpcs == 0 && s1.OneSided == s0.OneSided+1) {
				break
			}
		}
		if tc.oneSided && (rpcs != 0 || reads == 0) {
			t.Errorf("%v: %d RPC GETs, %d READs; want a one-sided read", tc.level, rpcs, reads)
		}
		if !tc.oneSided && (rpcs != 1 || reads != 0) {
			t.Errorf("%v: %d RPC GETs, %d READs; want an RPC", tc.level, rpcs, reads)
		}
	}
}
