package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
)

func newClusterClient(t *testing.T, cfg client.Config) *client.Client {
	t.Helper()
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = time.Minute // a failure must come from the cause, not the deadline
	}
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// clusterOf is the id of n's cluster, as the client prints it.
func clusterOf(n *kvdtest.Node) client.ClusterID { return client.ClusterID(n.Srv.Node().ClusterID()) }

// checkMismatch checks that err refuses endpoint as a member of cluster
// got, the client's being want, naming both ids and the endpoint.
func checkMismatch(t *testing.T, err error, endpoint string, got, want client.ClusterID) {
	t.Helper()
	var cm *client.ClusterMismatchError
	if !errors.As(err, &cm) || !errors.Is(err, client.ErrClusterMismatch) {
		t.Fatalf("err = %v, want a ClusterMismatchError", err)
	}
	if cm.Endpoint != endpoint || client.ClusterID(cm.Got) != got || client.ClusterID(cm.Want) != want {
		t.Fatalf("mismatch %+v, want endpoint %s of cluster %s, client's %s", cm, endpoint, got, want)
	}
	for _, s := range []string{endpoint, got.String(), want.String()} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not name %s", err, s)
		}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %q waited out the deadline: a foreign endpoint is refused at once", err)
	}
}

// TestClientRefusesAnotherCluster: a client pins the cluster of the first
// endpoint it reaches, and refuses an endpoint of another cluster (two
// single-node clusters here: the mistake of a node bootstrapped alone)
// instead of writing to it, naming both ids. Without the check the PUT
// succeeds on the other cluster.
func TestClientRefusesAnotherCluster(t *testing.T) {
	a := kvdtest.StartCluster(t, 1, kvdtest.Options{})
	b := kvdtest.StartCluster(t, 1, kvdtest.Options{})
	kvdtest.WaitLeader(t, a, 10*time.Second)
	kvdtest.WaitLeader(t, b, 10*time.Second)
	idA, idB := clusterOf(a[0]), clusterOf(b[0])
	if idA == idB {
		t.Fatalf("both clusters have id %s", idA)
	}
	ctx := context.Background()
	c := newClusterClient(t, client.Config{Endpoints: []string{a[0].Addr, b[0].Addr}})
	if err := c.Put(ctx, []byte("k"), []byte("a")); err != nil {
		t.Fatal(err)
	}
	a[0].Stop() // the client must now try b, and refuse it
	// A read first: a write whose connection the stop closed under it
	// would fail at once as "maybe applied", before trying b.
	_, err := c.Get(ctx, []byte("k"))
	checkMismatch(t, err, b[0].Addr, idB, idA)
	err = c.Put(ctx, []byte("k"), []byte("b"))
	checkMismatch(t, err, b[0].Addr, idB, idA)
	if !errors.Is(err, client.ErrNotApplied) {
		t.Errorf("err = %v, want it to say the write was not applied", err)
	}
	onlyB := newClusterClient(t, client.Config{Endpoints: []string{b[0].Addr}})
	if _, err := onlyB.Get(ctx, []byte("k")); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("b's k: %v, want not found (the write went to another cluster)", err)
	}
}

// TestClientConfiguredClusterID: with Config.ClusterID, a first endpoint of
// another cluster is refused (without it, the client would pin that
// cluster), and the client goes on to the endpoints of its own.
func TestClientConfiguredClusterID(t *testing.T) {
	a := kvdtest.StartCluster(t, 1, kvdtest.Options{})
	b := kvdtest.StartCluster(t, 1, kvdtest.Options{})
	kvdtest.WaitLeader(t, a, 10*time.Second)
	kvdtest.WaitLeader(t, b, 10*time.Second)
	ctx := context.Background()
	c := newClusterClient(t, client.Config{Endpoints: []string{b[0].Addr, a[0].Addr}, ClusterID: clusterOf(a[0])})
	for _, cons := range []client.Consistency{client.Linearizable, client.Serializable} {
		if err := c.Put(ctx, []byte("k"), []byte("a")); err != nil {
			t.Fatal(err)
		}
		if v, err := c.Get(ctx, []byte("k"), client.WithConsistency(cons)); err != nil || string(v) != "a" {
			t.Fatalf("%v get: %q, %v", cons, v, err)
		}
	}
	onlyB := newClusterClient(t, client.Config{Endpoints: []string{b[0].Addr}, ClusterID: clusterOf(a[0])})
	err := onlyB.Put(ctx, []byte("k"), []byte("b"))
	checkMismatch(t, err, b[0].Addr, clusterOf(b[0]), clusterOf(a[0]))
	if !strings.Contains(err.Error(), "given") {
		t.Errorf("error %q does not say the client's id was given to it", err)
	}
	_, err = onlyB.Get(ctx, []byte("k"), client.WithConsistency(client.Serializable))
	checkMismatch(t, err, b[0].Addr, clusterOf(b[0]), clusterOf(a[0]))
}

// TestConnectionRefusedFailsFast: an endpoint where nothing listens fails
// a request at once, not when its deadline ends (the client's is an hour
// here), and the error says "connection refused" once, naming the address.
func TestConnectionRefusedFailsFast(t *testing.T) {
	dead := kvdtest.FreeAddrs(t, 1)[0]
	c := newClusterClient(t, client.Config{Endpoints: []string{dead}})
	ctx := context.Background()
	for name, call := range map[string]func() error{
		"put":    func() error { return c.Put(ctx, []byte("k"), []byte("v")) },
		"get":    func() error { _, err := c.Get(ctx, []byte("k")); return err },
		"member": func() error { _, err := c.Members(ctx); return err },
	} {
		err := call()
		switch {
		case !errors.Is(err, syscall.ECONNREFUSED) || !errors.Is(err, client.ErrUnavailable):
			t.Errorf("%s: %v, want ErrUnavailable for a refused connection", name, err)
		case errors.Is(err, context.DeadlineExceeded):
			t.Errorf("%s: %v waited out the deadline", name, err)
		case strings.Count(err.Error(), "connection refused") != 1 || strings.Count(err.Error(), dead) != 1:
			t.Errorf("%s: %q, want the address and \"connection refused\" once each", name, err)
		}
	}
}

// TestNotAnEndpoint: an HTTP server given as an endpoint (a node's metrics
// port, say) is named as not a kvd endpoint, and the request fails without
// waiting out its deadline.
func TestNotAnEndpoint(t *testing.T) {
	hs := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(hs.Close)
	addr := strings.TrimPrefix(hs.URL, "http://")
	c := newClusterClient(t, client.Config{Endpoints: []string{addr}, DialTimeout: 200 * time.Millisecond})
	_, err := c.Get(context.Background(), []byte("k"))
	if !errors.Is(err, client.ErrNotEndpoint) || !strings.Contains(err.Error(), addr+" is not a kvd endpoint") {
		t.Fatalf("get: %v, want %s named as not a kvd endpoint", err, addr)
	}
	if errors.Is(err, context.DeadlineExceeded) && !strings.Contains(err.Error(), "sent no kvd hello") {
		t.Fatalf("get: %v", err)
	}
}

// TestLostQuorumSaysNoLeader: with two of three nodes down, a write fails
// saying there is no leader, rather than naming a dead node's error last.
func TestLostQuorumSaysNoLeader(t *testing.T) {
	nodes := kvdtest.StartCluster(t, 3, kvdtest.Options{})
	leader := kvdtest.WaitLeader(t, nodes, 10*time.Second)
	var live *kvdtest.Node
	for _, n := range nodes {
		if n != leader && live == nil {
			live = n
		} else {
			n.Stop()
		}
	}
	c := newClusterClient(t, client.Config{Endpoints: kvdtest.Endpoints(nodes), RequestTimeout: 2 * time.Second})
	var err error
	for try := 0; try < 20; try++ { // until the survivor has noticed its leader is gone
		if err = c.Put(context.Background(), []byte("k"), []byte("v")); errors.Is(err, client.ErrNoLeader) {
			break
		}
	}
	if !errors.Is(err, client.ErrNoLeader) || !strings.Contains(err.Error(), "no leader") {
		t.Fatalf("put without quorum: %v, want ErrNoLeader", err)
	}
	if !strings.Contains(err.Error(), live.Addr+": knows no leader") {
		t.Errorf("put without quorum: %q does not name the live node's answer", err)
	}
	// A read's barrier finds no leader too: the server answers "not
	// leader, leader unknown" for it, which the client names.
	_, err = c.Get(context.Background(), []byte("k"), client.WithConsistency(client.ReadIndex))
	if !errors.Is(err, client.ErrNoLeader) || !strings.Contains(err.Error(), live.Addr+": knows no leader") {
		t.Fatalf("readindex get without quorum: %v, want ErrNoLeader naming %s", err, live.Addr)
	}
}

// TestClientPinsMostEndpointsCluster: with no Config.ClusterID, a node of
// another cluster listed first does not decide the client's cluster: the
// cluster most endpoints name does, and the first endpoint is refused.
// Without that, the first endpoint's cluster would take the write.
func TestClientPinsMostEndpointsCluster(t *testing.T) {
	a := kvdtest.StartCluster(t, 3, kvdtest.Options{})
	b := kvdtest.StartCluster(t, 1, kvdtest.Options{})
	kvdtest.WaitLeader(t, a, 10*time.Second)
	kvdtest.WaitLeader(t, b, 10*time.Second)
	ctx := context.Background()
	// A long attempt timeout: settling waits for most endpoints for half
	// of one, and must not give up on a loaded machine.
	c := newClusterClient(t, client.Config{Endpoints: append([]string{b[0].Addr}, kvdtest.Endpoints(a)...),
		AttemptTimeout: 20 * time.Second, DialTimeout: 10 * time.Second})
	if err := c.Put(ctx, []byte("k"), []byte("a")); err != nil {
		t.Fatal(err)
	}
	onlyB := newClusterClient(t, client.Config{Endpoints: []string{b[0].Addr}})
	if _, err := onlyB.Get(ctx, []byte("k")); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("b's k: %v, want not found (the write went to b's cluster)", err)
	}
	if v, err := c.Get(ctx, []byte("k")); err != nil || string(v) != "a" {
		t.Fatalf("get: %q, %v", v, err)
	}
	if _, err := c.Status(ctx, b[0].Addr); err != nil {
		t.Fatalf("status of the other cluster's node: %v", err)
	}
}
