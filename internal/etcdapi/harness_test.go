package etcdapi_test

import (
	"net"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/etcdapi"
	"github.com/kvd-project/kvd/internal/kvdtest"
)

// env is a kvd cluster with etcd's API served in front of it, and a
// clientv3 client of that API.
type env struct {
	nodes []*kvdtest.Node
	kvd   *client.Client
	srv   *etcdapi.Server
	addr  string // the gRPC listener
	etcd  *clientv3.Client
}

// start runs an n-node in-process cluster and serves etcd's API for it on
// a loopback port, with cfg (Client is filled in).
func start(t testing.TB, n int, cfg etcdapi.Config) *env {
	t.Helper()
	return startOpts(t, n, cfg, kvdtest.Options{})
}

// startOpts is start with the nodes' options.
func startOpts(t testing.TB, n int, cfg etcdapi.Config, o kvdtest.Options) *env {
	t.Helper()
	nodes := kvdtest.StartCluster(t, n, o)
	kvdtest.WaitLeader(t, nodes, 10*time.Second)
	kc, err := client.New(client.Config{Endpoints: kvdtest.Endpoints(nodes)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kc.Close() })
	cfg.Client = kc
	srv, ec, addr := serve(t, cfg)
	return &env{nodes: nodes, kvd: kc, srv: srv, addr: addr, etcd: ec}
}

// serve serves etcd's API with cfg (its Client given) on a loopback port,
// and returns the server, a clientv3 client of it and its address.
func serve(t testing.TB, cfg etcdapi.Config) (*etcdapi.Server, *clientv3.Client, string) {
	t.Helper()
	srv, err := etcdapi.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := srv.NewGRPCServer()
	go g.Serve(l)
	t.Cleanup(g.Stop)
	ec, err := clientv3.New(clientv3.Config{Endpoints: []string{l.Addr().String()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ec.Close() })
	return srv, ec, l.Addr().String()
}
