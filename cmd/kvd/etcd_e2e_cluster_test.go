package main_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
	"github.com/kvd-project/kvd/internal/tlsutil/tlstest"
)

// etcdctlMember: member list, add --learner, promote (refused: the learner
// never started), remove; a gateway lists itself alone and refuses
// changes.
func etcdctlMember(c etcdctl, tg etcdTarget) {
	if tg.gateway {
		c.match(fmt.Sprintf(`[0-9a-f]+, started, kvd-gateway, , http://%s, false`, regexp.QuoteMeta(tg.endpoints[0])), "member", "list")
		c.fails("not supported", "member", "add", "n9", "--peer-urls", "http://127.0.0.1:1")
		return
	}
	list := c.ok("member", "list")
	for i := range tg.endpoints {
		want := fmt.Sprintf("%x, started, %d, http://", i+1, i+1)
		if !strings.Contains(list, want) {
			c.t.Errorf("member list lacks %q:\n%s", want, list)
		}
	}
	peer := "http://" + kvdtest.FreeAddrs(c.t, 1)[0]
	// 3.4 says "added to cluster", 3.7 "added as learner to cluster".
	m := c.match(`Member +([0-9a-f]+) added (as learner )?to cluster +([0-9a-f]+)\n\n(?s:.*)ETCD_INITIAL_CLUSTER_STATE="existing"`,
		"member", "add", "learner", "--peer-urls", peer, "--learner")
	id, cid := m[1], m[3]
	defer c.run("", "member", "remove", id) // if a check below fails first
	c.match(fmt.Sprintf(`(?s:.*)\n%s, unstarted, , %s, , true(\n.*)?`, id, regexp.QuoteMeta(peer)), "member", "list")
	c.fails("etcdserver: can only promote a learner member which is in sync with leader", "member", "promote", id)
	c.match(fmt.Sprintf(`Member +%s removed from cluster +%s`, id, cid), "member", "remove", id)
	if list := c.ok("member", "list"); strings.Contains(list, id+", ") {
		c.t.Errorf("member list after remove still has %s:\n%s", id, list)
	}
}

// etcdctlEndpoint: endpoint status, health and hashkv, a line per
// endpoint.
func etcdctlEndpoint(c etcdctl, tg etcdTarget) {
	status := c.ok("endpoint", "status")
	// etcdctl 3.4 prints health to stderr, 3.7 to stdout.
	out, stderr, err := c.run("", "endpoint", "health")
	if err != nil {
		c.t.Errorf("endpoint health: %v\n%s%s", err, out, stderr)
	}
	health := out + stderr
	hash := c.ok("endpoint", "hashkv")
	for _, ep := range tg.endpoints {
		q := regexp.QuoteMeta(ep)
		for _, w := range []struct{ what, out, re string }{
			{"status", status, `(?m)^` + q + `, [0-9a-f]+, 3\.[0-9.]+, `},
			{"health", health, `(?m)^` + q + ` is healthy: successfully committed proposal: took = `},
			{"hashkv", hash, `(?m)^` + q + `, [0-9]+(, [0-9]+)?$`},
		} {
			if !regexp.MustCompile(w.re).MatchString(w.out) {
				c.t.Errorf("endpoint %s lacks a line for %s matching %s:\n%s", w.what, ep, w.re, w.out)
			}
		}
	}
}

// endpointStatus is one entry of etcdctl endpoint status -w json.
type endpointStatus struct {
	Endpoint string
	Status   struct {
		Header struct {
			MemberID uint64 `json:"member_id"`
		} `json:"header"`
		Leader uint64 `json:"leader"`
	}
}

// etcdctlMoveLeader: move-leader from the leader's endpoint to another
// member; a gateway, one endpoint for the whole cluster, says what
// etcdctl makes of it (logged, not asserted).
func etcdctlMoveLeader(c etcdctl, tg etcdTarget) {
	var st []endpointStatus
	if err := json.Unmarshal([]byte(c.ok("endpoint", "status", "-w", "json")), &st); err != nil || len(st) == 0 {
		c.t.Fatalf("endpoint status -w json: %v %+v", err, st)
	}
	leader := st[0].Status.Leader
	target := leader%3 + 1
	if tg.gateway {
		out, stderr, err := c.run("", "move-leader", fmt.Sprint(target))
		c.t.Logf("gateway: move-leader %d: err %v\n%s%s", target, err, out, stderr)
		return
	}
	c.want(fmt.Sprintf("Leadership transferred from %x to %x", leader, target), "move-leader", fmt.Sprintf("%x", target))
	// Clients that still knew the old leader may fail a write "maybe
	// applied" (etcd's request timed out) until they hear of the new one.
	wait.NoError(c.t, "a put after move-leader", func() error {
		if _, stderr, err := c.run("", "put", "etcd-e2e-probe", "ok"); err != nil {
			return fmt.Errorf("%v: %s", err, stderr)
		}
		return nil
	})
}

// etcdctlSnapshot: snapshot save writes the file.
func etcdctlSnapshot(c etcdctl, dir string) {
	path := filepath.Join(dir, "snap.db")
	c.match(`Snapshot saved at `+regexp.QuoteMeta(path)+`(\nServer version .*)?`, "snapshot", "save", path)
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		c.t.Errorf("snapshot save: %v %v, want a file", fi, err)
	}
}

// etcdctlCheckPerf runs check perf --load s and logs its verdict: a
// shared test machine says nothing of kvd's throughput, so only that it
// ran to a verdict is checked.
func etcdctlCheckPerf(c etcdctl) {
	c.ok("del", "--prefix", "/etcdctl-check-perf/") // check perf refuses to run over keys of its own left behind
	out, stderr, err := c.run("", "check", "perf", "--load", "s")
	c.t.Logf("check perf --load s: err %v\n%s", err, out)
	if !strings.Contains(out, "PASS") && !strings.Contains(out, "FAIL") {
		c.t.Errorf("check perf --load s printed no verdict: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr)
	}
}

// TestEtcdAPIOverTLS: a node with client TLS serves etcd's API on an
// https:// URL to clients with a certificate of its --trusted-ca-file,
// through its own client of the cluster; so does a gateway, dialling the
// node with a client certificate (--cacert, --cert, --key) and serving
// with its own (--cert-file...). A certificate that --read-only-client-cn
// names may read but not write, as on kvd's own listener.
func TestEtcdAPIOverTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping the process test in -short mode")
	}
	bin := etcdctls(t)["3.7"]
	f := newTLSFiles(t)
	wcert, wkey := f.clientCA.Issue(t, "writer", tlstest.Options{}).Write(t, f.dir, "writer")
	rcert, rkey := f.clientCA.Issue(t, "reader", tlstest.Options{}).Write(t, f.dir, "reader")
	addrs := kvdtest.FreeAddrs(t, 2)
	pc := kvdtest.StartProcClusterOpts(t, kvdtest.SharedBin(t), 1, kvdtest.ProcOptions{
		Extra: append(f.serverArgs(), "--read-only-client-cn", "reader", "--listen-client-urls", "https://"+addrs[0]),
	})
	startGateway(t, "--endpoints", pc.Endpoints()[0], "--listen-client-urls", "https://"+addrs[1],
		"--cacert", f.caFile, "--cert", wcert, "--key", wkey,
		"--cert-file", f.cert, "--key-file", f.key, "--trusted-ca-file", f.caFile, "--client-cert-auth", "--read-only-client-cn", "reader")
	writer := []string{"--cacert", f.caFile, "--cert", wcert, "--key", wkey}
	reader := []string{"--cacert", f.caFile, "--cert", rcert, "--key", rkey}
	for i, what := range []string{"node", "gateway"} {
		t.Run(what, func(t *testing.T) {
			c := etcdctlAt(t, bin, addrs[i])
			wait.NoError(t, "a put over TLS", func() error {
				out, stderr, err := c.run("", append(writer, "put", "k", what)...)
				if err != nil || strings.TrimSpace(out) != "OK" {
					return fmt.Errorf("%v: %s%s", err, out, stderr)
				}
				return nil
			})
			c.want("k\n"+what, append(reader, "get", "k")...)
			c.fails("etcdserver: permission denied", append(reader, "put", "k", "v2")...)
			c.fails("etcdserver: permission denied", append(reader, "del", "k")...)
			c.want(what, append(writer, "get", "k", "--print-value-only")...)
			c.fails("", append([]string{"--cacert", f.caFile}, "get", "k")...) // no certificate
		})
	}
}
