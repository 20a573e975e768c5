//go:build rdma

package chaos

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/resp"
)

// fronted is a 3-node cluster over RDMA whose nodes serve etcd's API and
// Redis' protocol on loopback TCP, and a `kvd gateway` process serving
// both beside it, all from the built kvd binary.
type fronted struct {
	pc              *kvdtest.ProcCluster
	nodeEtcd        []string // node i+1's etcd URL
	nodeRedis       []string // node i+1's Redis address
	gwEtcd, gwRedis string
}

// startFronted starts the cluster and the gateway. nodeExtra gives node id
// flags of its own (nil: none), gwExtra the gateway's (after the
// transport's).
func startFronted(t *testing.T, nodeExtra func(id uint64) []string, gwExtra []string) *fronted {
	t.Helper()
	addrs := kvdtest.FreeAddrs(t, 8)
	f := &fronted{gwEtcd: "http://" + addrs[6], gwRedis: addrs[7]}
	for i := range 3 {
		f.nodeEtcd = append(f.nodeEtcd, "http://"+addrs[i])
		f.nodeRedis = append(f.nodeRedis, addrs[3+i])
	}
	dev := os.Getenv("KVD_RDMA_DEVICE")
	f.pc = kvdtest.StartProcClusterOpts(t, procBin(t), 3, kvdtest.ProcOptions{
		Transport: "rdma", Host: rdmaHost(t),
		// A long tick: the emulated VM on a busy host can stall a leader
		// for seconds, and a cluster that keeps re-electing measures
		// nothing. Elections time out after 10 ticks.
		Extra: []string{"--rdma-device", dev, "--table-mem", "16MiB", "--tick", "500ms"},
		PerNode: func(id uint64) []string {
			args := []string{"--listen-client-urls", f.nodeEtcd[id-1], "--redis-listen", f.nodeRedis[id-1]}
			if nodeExtra != nil {
				args = append(args, nodeExtra(id)...)
			}
			return args
		},
	})
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range f.pc.Procs {
				t.Logf("node %d's output:\n%s", p.ID, p.Logs())
			}
		}
	})
	args := append([]string{"gateway", "--log-level", "warn", "--endpoints", strings.Join(f.pc.Endpoints(), ","),
		"--transport", "rdma", "--rdma-device", dev, "--listen-client-urls", f.gwEtcd, "--redis-listen", f.gwRedis}, gwExtra...)
	startProc(t, "kvd gateway", filepath.Join(procBin(t), "kvd"), args...)
	return f
}

// startProc runs a process until the test ends, and shows its output if
// the test failed.
func startProc(t *testing.T, name, path string, args ...string) {
	t.Helper()
	var mu sync.Mutex
	var out strings.Builder
	w := writerFunc(func(b []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return out.Write(b) })
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGKILL)
		<-done
		if t.Failed() {
			mu.Lock()
			t.Logf("%s's output:\n%s", name, out.String())
			mu.Unlock()
		}
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// waitEtcdPut retries a Put through ec until one succeeds: the fronts
// start before the cluster has a leader, which the emulated VM on a busy
// host can take long to elect.
func waitEtcdPut(t *testing.T, ec *clientv3.Client, what, key, val string) {
	t.Helper()
	const wait = 150 * time.Second
	var err error
	for deadline := time.Now().Add(wait); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if _, err = ec.Put(ctxFor(10*time.Second), key, val); err == nil {
			return
		}
	}
	t.Fatalf("no Put through %s succeeded in %v: %v", what, wait, err)
}

// etcdGet returns key's value read through ec ("" if missing).
func etcdGet(ec *clientv3.Client, key string) (string, error) {
	r, err := ec.Get(ctxFor(10*time.Second), key)
	if err != nil {
		return "", err
	}
	if len(r.Kvs) == 0 {
		return "", nil
	}
	return string(r.Kvs[0].Value), nil
}

// respConn is a tiny RESP2 client: commands as multibulk arrays (written
// with resp.Writer), replies parsed for the kinds GET, SET and INFO give.
type respConn struct {
	nc net.Conn
	w  *resp.Writer
	br *bufio.Reader
}

func dialRESP(t *testing.T, addr string) *respConn {
	t.Helper()
	var nc net.Conn
	var err error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if nc, err = net.DialTimeout("tcp", addr, 2*time.Second); err == nil {
			t.Cleanup(func() { nc.Close() })
			return &respConn{nc: nc, w: resp.NewWriter(nc), br: bufio.NewReader(nc)}
		}
	}
	t.Fatalf("Redis listener %s: %v", addr, err)
	return nil
}

// errNil is the null bulk reply (GET of a missing key).
var errNil = errors.New("(nil)")

// do sends one command and returns its reply: a simple or bulk string, an
// integer's digits; an error reply is an error.
func (c *respConn) do(args ...string) (string, error) {
	c.nc.SetDeadline(time.Now().Add(20 * time.Second))
	c.w.Array(len(args))
	for _, a := range args {
		c.w.BulkString(a)
	}
	if err := c.w.Flush(); err != nil {
		return "", err
	}
	line, err := c.br.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", errors.New("empty reply line")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", errors.New(line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n > 1<<20 {
			return "", fmt.Errorf("bad bulk length %q", line)
		}
		if n < 0 {
			return "", errNil
		}
		b := make([]byte, n+2)
		if _, err := io.ReadFull(c.br, b); err != nil {
			return "", err
		}
		return string(b[:n]), nil
	}
	return "", fmt.Errorf("unexpected reply %q", line)
}

// clientGets reads INFO stats' counts of the serving process's kvd client
// GETs (kvd_client_gets_one_sided, _rpc, ...).
func (c *respConn) clientGets(t *testing.T) map[string]uint64 {
	t.Helper()
	info, err := c.do("INFO", "stats")
	if err != nil {
		t.Fatalf("INFO stats: %v", err)
	}
	out := map[string]uint64{}
	for _, line := range strings.Split(info, "\r\n") {
		name, v, ok := strings.Cut(line, ":")
		if n, err := strconv.ParseUint(v, 10, 64); ok && err == nil && strings.HasPrefix(name, "kvd_client_") {
			out[name] = n
		}
	}
	if _, ok := out["kvd_client_gets_one_sided"]; !ok {
		t.Fatalf("INFO stats has no kvd_client_gets_one_sided: %q", info)
	}
	return out
}

// TestRDMAGatewayGetsOneSided: a `kvd gateway` over RDMA in front of a
// 3-node RDMA cluster whose nodes serve etcd's API and Redis' protocol.
// What a node's front writes, the gateway reads at once (linearizable),
// through etcd's API and Redis', and the gateway's GETs are one-sided
// READs (its client's counts, from INFO stats). Then, alternating in one
// run: etcd Get through the gateway against through the leader's and a
// follower's etcd listener (gRPC to the node, a range read by ReadIndex),
// and RESP GET through the gateway against through the leader's Redis
// listener; RDMAVM-GATEWAY: lines give p50/p99, and ratios to this run's
// ib_read_lat (no timing assertions).
func TestRDMAGatewayGetsOneSided(t *testing.T) {
	f := startFronted(t, nil, nil)
	waitEtcdPut(t, etcdClientOf(t, f.nodeEtcd[0]), "node 1's etcd listener", "warm", "up")
	kc := rdmaClient(t, f.pc.Endpoints(), client.Linearizable)
	leader := stableLeader(t, kc, f.pc)
	follower := f.pc.Procs[leader.ID%3] // another node
	nodeEC := []*clientv3.Client{etcdClientOf(t, f.nodeEtcd[leader.ID-1]), etcdClientOf(t, f.nodeEtcd[follower.ID-1])}
	gwEC := etcdClientOf(t, f.gwEtcd)
	waitEtcdPut(t, nodeEC[0], "the leader's etcd listener", "warm", "up")
	waitEtcdPut(t, gwEC, "the gateway's etcd listener", "warm", "up")
	gwR, nodeR := dialRESP(t, f.gwRedis), dialRESP(t, f.nodeRedis[leader.ID-1])

	before := gwR.clientGets(t)
	const rounds = 50
	for i := range rounds {
		key, val := fmt.Sprintf("lin%d", i%5), fmt.Sprintf("v%d", i)
		retryWrite(t, "etcd Put "+key+" through a node", func() error { _, err := nodeEC[i%2].Put(ctxFor(10*time.Second), key, val); return err })
		if got, err := etcdGet(gwEC, key); err != nil || got != val {
			t.Fatalf("etcd Get %s through the gateway right after the node's Put of %q: %q, %v", key, val, got, err)
		}
		retryWrite(t, "SET "+key+" through the leader's Redis listener", func() error { _, err := nodeR.do("SET", key, val+"r"); return err })
		if got, err := gwR.do("GET", key); err != nil || got != val+"r" {
			t.Fatalf("GET %s through the gateway right after the node's SET of %q: %q, %v", key, val+"r", got, err)
		}
	}
	after := gwR.clientGets(t)
	oneSided := after["kvd_client_gets_one_sided"] - before["kvd_client_gets_one_sided"]
	rpc := after["kvd_client_gets_rpc"] - before["kvd_client_gets_rpc"]
	t.Logf("gateway client over %d etcd Gets and %d RESP GETs: %d one-sided, %d by RPC, %d fallbacks", rounds, rounds, oneSided, rpc,
		after["kvd_client_gets_fallback"]-before["kvd_client_gets_fallback"])
	if oneSided == 0 {
		t.Fatalf("the gateway's GETs were not one-sided: INFO before %v, after %v", before, after)
	}
	fmt.Printf("RDMAVM-GATEWAY: linearizable: %d node writes read at once through the gateway (etcd and RESP); gateway GETs %d one-sided, %d RPC\n",
		2*rounds, oneSided, rpc)
	measureFronts(t, gwEC, nodeEC[0], nodeEC[1], gwR, nodeR)
}

// retryWrite retries a write of one value until it is acknowledged: on
// the emulated VM a commit can outlast the fronts' one-second attempt
// timeout ("may or may not have been applied"); writing the same value
// again is harmless, and the read that follows checks the acknowledged
// one.
func retryWrite(t *testing.T, what string, write func() error) {
	t.Helper()
	var err error
	for range 20 {
		if err = write(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: %v", what, err)
}

// stableLeader waits (longer than rdmaLeader, for a busy host) for a
// node that leads with a valid lease over rdma.
func stableLeader(t *testing.T, c *client.Client, pc *kvdtest.ProcCluster) *kvdtest.Proc {
	t.Helper()
	for deadline := time.Now().Add(150 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		for _, p := range pc.Procs {
			st, err := c.Status(ctxFor(5*time.Second), p.Addr)
			if err == nil && st.IsLeader && st.LeaseValid && st.Transport == "rdma" {
				return p
			}
		}
	}
	t.Fatal("no leader over rdma with a valid lease within 150s")
	return nil
}

// measureFronts times GETs of one key through each path, alternating
// them so that every path sees the same machine, and prints RDMAVM-GATEWAY:
// lines.
func measureFronts(t *testing.T, gwEC, leaderEC, followerEC *clientv3.Client, gwR, nodeR *respConn) {
	t.Helper()
	key, val := "probe", strings.Repeat("x", 32)
	if _, err := leaderEC.Put(ctxFor(10*time.Second), key, val); err != nil {
		t.Fatal(err)
	}
	etcdGetOf := func(ec *clientv3.Client) func() error {
		return func() error {
			got, err := etcdGet(ec, key)
			if err == nil && got != val {
				err = fmt.Errorf("read %q, want %q", got, val)
			}
			return err
		}
	}
	respGetOf := func(c *respConn) func() error {
		return func() error {
			got, err := c.do("GET", key)
			if err == nil && got != val {
				err = fmt.Errorf("read %q, want %q", got, val)
			}
			return err
		}
	}
	paths := []struct {
		name string
		get  func() error
		ds   []time.Duration
	}{
		{name: "etcd Get via gateway (one-sided RDMA READs)", get: etcdGetOf(gwEC)},
		{name: "etcd Get via leader's etcd listener (gRPC, range read)", get: etcdGetOf(leaderEC)},
		{name: "etcd Get via follower's etcd listener (gRPC, range read)", get: etcdGetOf(followerEC)},
		{name: "RESP GET via gateway --redis-listen", get: respGetOf(gwR)},
		{name: "RESP GET via leader's --redis-listen", get: respGetOf(nodeR)},
	}
	nodeBefore := nodeR.clientGets(t)
	const warmup, iters = 20, 300
	for i := range warmup + iters {
		for j := range paths {
			p := &paths[j]
			start := time.Now()
			if err := p.get(); err != nil {
				t.Fatalf("%s: %v", p.name, err)
			}
			if i >= warmup {
				p.ds = append(p.ds, time.Since(start))
			}
		}
	}
	nodeAfter := nodeR.clientGets(t)
	// A node's Redis front reaches the cluster over the node's transport,
	// so over rdma its GETs are one-sided too: say so beside the numbers.
	fmt.Printf("RDMAVM-GATEWAY: the leader's Redis front answered its %d GETs %d one-sided, %d by RPC\n",
		nodeAfter["kvd_client_gets"]-nodeBefore["kvd_client_gets"],
		nodeAfter["kvd_client_gets_one_sided"]-nodeBefore["kvd_client_gets_one_sided"],
		nodeAfter["kvd_client_gets_rpc"]-nodeBefore["kvd_client_gets_rpc"])
	readLat := perftestTypical(t, "ib_read_lat")
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	p50s := make([]time.Duration, len(paths))
	for j, p := range paths {
		slices.Sort(p.ds)
		p50, p99 := p.ds[len(p.ds)/2], p.ds[len(p.ds)*99/100]
		p50s[j] = p50
		fmt.Printf("RDMAVM-GATEWAY: %s: p50 %.0f us (%.1f x ib_read_lat %.1f us), p99 %.0f us, %d GETs\n",
			p.name, us(p50), us(p50)/readLat, readLat, us(p99), len(p.ds))
	}
	fmt.Printf("RDMAVM-GATEWAY: etcd Get p50: gateway / leader's listener = %.2f, gateway / follower's = %.2f\n",
		float64(p50s[0])/float64(p50s[1]), float64(p50s[0])/float64(p50s[2]))
	fmt.Printf("RDMAVM-GATEWAY: RESP GET p50: gateway / leader's listener = %.2f\n", float64(p50s[3])/float64(p50s[4]))
}

// TestRDMAFrontsWithAuth: nodes with --rdma-auth-file serve etcd's API and
// Redis' protocol through their own client, which connects with the rw key
// --rdma-auth-client-name names (the node's peer key would be refused
// client requests); a gateway connects with a key of its own. A write
// through one node's etcd listener reads back through another's Redis
// listener and through the gateway.
func TestRDMAFrontsWithAuth(t *testing.T) {
	dir := t.TempDir()
	keys, gwKey := filepath.Join(dir, "keys"), filepath.Join(dir, "gateway.key")
	var all strings.Builder
	for _, k := range []string{"node1:peer", "node2:peer", "node3:peer", "fronts:rw", "gateway:rw"} {
		fmt.Fprintf(&all, "%s:%s\n", k, randomHex(t))
	}
	if err := os.WriteFile(keys, []byte(all.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	gwLine := strings.Split(all.String(), "\n")[4]
	if err := os.WriteFile(gwKey, []byte(gwLine+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := startFronted(t, func(id uint64) []string {
		return []string{"--rdma-auth-file", keys, "--rdma-auth-name", fmt.Sprintf("node%d", id), "--rdma-auth-client-name", "fronts"}
	}, []string{"--rdma-auth-file", gwKey})
	node1 := etcdClientOf(t, f.nodeEtcd[0])
	waitEtcdPut(t, node1, "node 1's etcd listener", "authed", "yes")
	node2R := dialRESP(t, f.nodeRedis[1])
	if got, err := node2R.do("GET", "authed"); err != nil || got != "yes" {
		t.Fatalf("GET through node 2's Redis listener: %q, %v", got, err)
	}
	retryWrite(t, "SET through node 2's Redis listener", func() error { _, err := node2R.do("SET", "authed", "again"); return err })
	if got, err := etcdGet(etcdClientOf(t, f.gwEtcd), "authed"); err != nil || got != "again" {
		t.Fatalf("etcd Get through the gateway (its own rw key): %q, %v", got, err)
	}
	gwR := dialRESP(t, f.gwRedis)
	if got, err := gwR.do("GET", "authed"); err != nil || got != "again" {
		t.Fatalf("GET through the gateway: %q, %v", got, err)
	}
	// Right after the election the leader's read lease is not yet valid
	// and a linearizable GET correctly falls back to an RPC: GET until the
	// lease holds (as TestRDMAGatewayGetsOneSided waits for it).
	st := gwR.clientGets(t)
	for deadline := time.Now().Add(60 * time.Second); st["kvd_client_gets_one_sided"] == 0 && time.Now().Before(deadline); st = gwR.clientGets(t) {
		if got, err := gwR.do("GET", "authed"); err != nil || got != "again" {
			t.Fatalf("GET through the gateway: %q, %v", got, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if st["kvd_client_gets_one_sided"] == 0 {
		t.Errorf("the authenticated gateway's GETs were not one-sided within 60s: %v", st)
	}
	fmt.Println("RDMAVM-GATEWAY: auth: nodes' etcd and Redis fronts on an rw key, gateway on its own key: ok")
}

func randomHex(t *testing.T) string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
