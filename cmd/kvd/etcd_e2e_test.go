package main_test

import (
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/kvd-project/kvd/internal/kvdtest/wait"
)

// etcdTarget is what an etcdctl run talks to: the nodes' etcd API, or a
// gateway's.
type etcdTarget struct {
	name      string
	endpoints []string
	gateway   bool
}

// TestEtcdctlAgainstNodesAndGateway runs etcdctl 3.4 and 3.7, unmodified,
// against etcd's API served by a 3-node kvd cluster's nodes
// (--listen-client-urls) and by `kvd gateway`, and checks what they print
// as etcd prints it; and python3-etcd3's smoke script against both.
func TestEtcdctlAgainstNodesAndGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping the process test in -short mode")
	}
	ctls := etcdctls(t)
	requirePythonEtcd3(t)
	e := startEtcdEnv(t, ctls["3.7"])
	targets := []etcdTarget{{name: "node", endpoints: e.nodeURLs}, {name: "gateway", endpoints: []string{e.gateway}, gateway: true}}
	versions := []string{"3.4", "3.7"}
	t.Run("gateway/redis-cli", func(t *testing.T) {
		_, port, _ := net.SplitHostPort(e.redis)
		p, _ := strconv.Atoi(port)
		wait.NoError(t, "the gateway's Redis listener", func() error {
			return exec.Command("redis-cli", "-p", port, "ping").Run()
		})
		checkRedis(t, p)
	})
	for _, tg := range targets {
		t.Run(tg.name+"/python3-etcd3", func(t *testing.T) { runEtcd3Smoke(t, tg.endpoints[0], "/"+tg.name+"-py/") })
	}
	for _, tg := range targets {
		for _, v := range versions {
			t.Run(tg.name+"/etcdctl-"+v, func(t *testing.T) {
				p := fmt.Sprintf("/%s-%s/", tg.name, v) // each run's keys
				ctl := func(t *testing.T) etcdctl { return etcdctlAt(t, ctls[v], tg.endpoints...) }
				t.Run("get", func(t *testing.T) { etcdctlGet(ctl(t), p, v) })
				t.Run("del", func(t *testing.T) { etcdctlDel(ctl(t), p) })
				t.Run("txn", func(t *testing.T) { etcdctlTxn(ctl(t), p) })
				t.Run("watch", func(t *testing.T) { etcdctlWatch(ctl(t), p) })
				t.Run("compaction", func(t *testing.T) { etcdctlCompaction(ctl(t), p) })
				t.Run("lease", func(t *testing.T) { etcdctlLease(ctl(t), p) })
				t.Run("member", func(t *testing.T) { etcdctlMember(ctl(t), tg) })
				t.Run("endpoint", func(t *testing.T) { etcdctlEndpoint(ctl(t), tg) })
				t.Run("snapshot", func(t *testing.T) { etcdctlSnapshot(etcdctlAt(t, ctls[v], tg.endpoints[0]), t.TempDir()) })
			})
		}
	}
	for _, tg := range targets {
		t.Run(tg.name+"/etcdctl-3.7/check-perf", func(t *testing.T) { etcdctlCheckPerf(etcdctlAt(t, ctls["3.7"], tg.endpoints...)) })
	}
	// Last: a leader change may fail the writes of clients that knew the
	// old leader until they hear of the new one.
	for _, tg := range targets {
		for _, v := range versions {
			t.Run(tg.name+"/etcdctl-"+v+"/move-leader", func(t *testing.T) { etcdctlMoveLeader(etcdctlAt(t, ctls[v], tg.endpoints...), tg) })
		}
	}
}

// etcdctlGet: put and get with get's options.
func etcdctlGet(c etcdctl, p, version string) {
	c.want("OK", "put", p+"k", "v")
	c.want(p+"k\nv", "get", p+"k")
	for i, k := range []string{"a", "b", "c"} {
		c.want("OK", "put", p+"p/"+k, fmt.Sprint(i+1))
	}
	c.want(lines(p+"p/a", "1", p+"p/b", "2", p+"p/c", "3"), "get", p+"p/", "--prefix")
	c.want(lines(p+"p/b", "2", p+"p/c", "3"), "get", p+"p/b", "--from-key", "--limit", "2")
	c.want(lines(p+"p/a", "1"), "get", p+"p/", "--prefix", "--limit", "1")
	c.want(lines(p+"p/c", "3", p+"p/b", "2", p+"p/a", "1"), "get", p+"p/", "--prefix", "--sort-by=KEY", "--order=DESCEND")
	c.want(lines(p+"p/a", "", p+"p/b", "", p+"p/c", ""), "get", p+"p/", "--prefix", "--keys-only")
	c.want("v", "get", p+"k", "--print-value-only")
	if version != "3.4" { // 3.4 has no --count-only
		c.match(`.*\n"Count" : 3(\n.*)?`, "get", p+"p/", "--prefix", "--count-only", "-w", "fields")
	}
	c.want("OK", "put", p+"k", "v2")
	var r struct {
		Count int64 `json:"count"`
		Kvs   []struct {
			Key         []byte `json:"key"`
			Value       []byte `json:"value"`
			ModRevision int64  `json:"mod_revision"`
			Version     int64  `json:"version"`
		} `json:"kvs"`
	}
	if err := json.Unmarshal([]byte(c.ok("get", p+"k", "-w", "json")), &r); err != nil {
		c.t.Fatal(err)
	}
	if r.Count != 1 || len(r.Kvs) != 1 || string(r.Kvs[0].Key) != p+"k" || string(r.Kvs[0].Value) != "v2" || r.Kvs[0].Version != 2 {
		c.t.Fatalf("get -w json: %+v, want count 1 and %sk=v2 at version 2", r, p)
	}
	c.want(p+"k\nv", "get", p+"k", "--rev", fmt.Sprint(r.Kvs[0].ModRevision-1))
}

// etcdctlDel: del with --prefix and --prev-kv.
func etcdctlDel(c etcdctl, p string) {
	c.want("OK", "put", p+"d/x", "1")
	c.want("OK", "put", p+"d/y", "2")
	c.want(lines("1", p+"d/x", "1"), "del", p+"d/x", "--prev-kv")
	c.want("OK", "put", p+"d/z", "3")
	c.want("2", "del", p+"d/", "--prefix")
	c.want("", "get", p+"d/", "--prefix")
	c.want("0", "del", p+"d/x")
}

// txnPrompts are what etcdctl txn -i prints while reading its input.
const txnPrompts = "compares:\nsuccess requests (get, put, del):\nfailure requests (get, put, del):\n"

// etcdctlTxn: txn -i, its input on stdin, both branches.
func etcdctlTxn(c etcdctl, p string) {
	c.want("OK", "put", p+"t", "v1")
	in := fmt.Sprintf("value(%q) = \"v1\"\n\nput %s v2\n\nget %s\n\n", p+"t", p+"t", p+"t")
	c.wantIn(in, txnPrompts+"SUCCESS\n\nOK", "txn", "-i")
	c.wantIn(in, txnPrompts+lines("FAILURE", "", p+"t", "v2"), "txn", "-i")
}

// etcdctlWatch: watch from a past revision, over a prefix, with the
// previous values.
func etcdctlWatch(c etcdctl, p string) {
	c.want("OK", "put", p+"w/1", "a")
	rev := modRevision(c, p+"w/1")
	c.want("OK", "put", p+"w/1", "b")
	c.want("OK", "put", p+"w/2", "c")
	c.watch(lines("PUT", p+"w/1", "a", "PUT", p+"w/1", "a", p+"w/1", "b", "PUT", p+"w/2", "c"),
		p+"w/", "--prefix", "--rev", fmt.Sprint(rev), "--prev-kv")
	c.watch(lines("PUT", p+"w/1", "b"), p+"w/1", "--rev", fmt.Sprint(rev+1))
}

// etcdctlCompaction: compaction, then a read below it fails as etcd's.
func etcdctlCompaction(c etcdctl, p string) {
	c.want("OK", "put", p+"c", "1")
	rev := modRevision(c, p+"c")
	c.want("OK", "put", p+"c", "2")
	c.want(fmt.Sprintf("compacted revision %d", rev), "compaction", fmt.Sprint(rev))
	c.fails("etcdserver: mvcc: required revision has been compacted", "get", p+"c", "--rev", fmt.Sprint(rev-1))
	c.want(lines(p+"c", "2"), "get", p+"c")
}

// etcdctlLease: grant, keep-alive --once, timetolive --keys, list,
// revoke.
func etcdctlLease(c etcdctl, p string) {
	id := c.match(`lease ([0-9a-f]+) granted with TTL\(60s\)`, "lease", "grant", "60")[1]
	c.want(fmt.Sprintf("lease %s keepalived with TTL(60)", id), "lease", "keep-alive", "--once", id)
	c.want("OK", "put", "--lease", id, p+"l", "v")
	c.match(fmt.Sprintf(`lease %s granted with TTL\(60s\), remaining\([0-9]+s\), attached keys\(\[%s\]\)`, id, p+"l"),
		"lease", "timetolive", id, "--keys")
	c.match(fmt.Sprintf(`found [0-9]+ leases\n(.*\n)?%s(\n.*)?`, id), "lease", "list")
	c.want(fmt.Sprintf("lease %s revoked", id), "lease", "revoke", id)
	c.want(fmt.Sprintf("lease %s already expired", id), "lease", "timetolive", id)
	c.want("", "get", p+"l")
}

// lines joins its arguments with newlines.
func lines(s ...string) string { return strings.Join(s, "\n") }

// modRevision is key's mod_revision, from get -w json.
func modRevision(c etcdctl, key string) int64 {
	c.t.Helper()
	var r struct {
		Kvs []struct {
			ModRevision int64 `json:"mod_revision"`
		} `json:"kvs"`
	}
	if err := json.Unmarshal([]byte(c.ok("get", key, "-w", "json")), &r); err != nil || len(r.Kvs) != 1 {
		c.t.Fatalf("get %s -w json: %v %+v", key, err, r)
	}
	return r.Kvs[0].ModRevision
}
