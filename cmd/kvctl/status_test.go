package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
)

func startCluster(t *testing.T, n int) ([]*kvdtest.Node, client.ClusterID) {
	t.Helper()
	nodes := kvdtest.StartCluster(t, n, kvdtest.Options{})
	kvdtest.WaitLeader(t, nodes, 10*time.Second)
	return nodes, client.ClusterID(nodes[0].Srv.Node().ClusterID())
}

// TestStatusExitCodes: status exits 0 for a sound cluster and 1, with a
// warning naming the endpoint and why, for an endpoint of another cluster
// (two leaders then), a dead endpoint and a node without a leader.
func TestStatusExitCodes(t *testing.T) {
	a, idA := startCluster(t, 3)
	b, idB := startCluster(t, 1)
	eps := strings.Join(kvdtest.Endpoints(a), ",")
	dead := kvdtest.FreeAddrs(t, 1)[0]
	for _, tc := range []struct {
		name string
		args []string
		want []string // in stderr, each; none: exit 0
	}{
		{"sound", []string{"--endpoints", eps, "status"}, nil},
		{"sound, its cluster id given", []string{"--endpoints", eps, "--cluster-id", idA.String(), "endpoint", "status"}, nil},
		{"foreign node", []string{"--endpoints", eps + "," + b[0].Addr, "status"}, []string{
			b[0].Addr + " (node 1) is a member of cluster " + idB.String() + ", not of cluster " + idA.String(),
			"2 endpoints say they lead"}},
		{"foreign node, its id given", []string{"--endpoints", b[0].Addr, "--cluster-id", idA.String(), "status"}, []string{
			b[0].Addr + " (node 1) is a member of cluster " + idB.String() + ", not of cluster " + idA.String() + " (given by --cluster-id)"}},
		{"dead endpoint", []string{"--endpoints", eps + "," + dead, "status"}, []string{dead + " is unreachable: ", "connection refused"}},
	} {
		out, errOut, code := kvctlAt(tc.args[1], "", tc.args[2:]...)
		switch {
		case tc.want == nil && (code != 0 || errOut != ""):
			t.Errorf("%s: exit %d, stderr %q; want 0 and no warning", tc.name, code, errOut)
		case tc.want != nil && code != 1:
			t.Errorf("%s: exit %d, stderr %q; want 1", tc.name, code, errOut)
		case !strings.Contains(out, "CLUSTER ID") || !strings.Contains(out, "READ LEASE") || !strings.Contains(out, "DB SIZE"):
			t.Errorf("%s: table %q lacks a column", tc.name, out)
		}
		for _, w := range tc.want {
			if !strings.Contains(errOut, "kvctl: warning: ") || !strings.Contains(errOut, w) {
				t.Errorf("%s: stderr %q lacks %q", tc.name, errOut, w)
			}
		}
	}
	// The JSON keys: cluster_id as the table's hex string, is_learner,
	// db_size (Pebble's files are never empty).
	out, errOut, code := kvctlAt(a[0].Addr, "", "-w", "json", "status")
	var st []map[string]any
	if err := json.Unmarshal([]byte(out), &st); code != 0 || err != nil || len(st) != 1 {
		t.Fatalf("-w json status: exit %d, %v, %q %q", code, err, out, errOut)
	}
	if st[0]["cluster_id"] != idA.String() || st[0]["is_learner"] != false || !(st[0]["db_size"].(float64) > 0) {
		t.Errorf("-w json status: %v", st[0])
	}

	// Two of three nodes stopped: the third has no leader once it notices.
	a[1].Stop()
	a[2].Stop()
	wait.For(t, "node 1 to lose its leader", func() bool {
		_, errOut, code := kvctlAt(a[0].Addr, "", "status")
		return code == 1 && strings.Contains(errOut, a[0].Addr+" (node 1) has no leader (LEADER 0)")
	})
}

// TestEndpointHealth: endpoint health as etcdctl's: a line per endpoint,
// healthy ones on standard output, the others on standard error with why,
// and exit 1 if any is unhealthy; -w json has endpoint, health, took and
// error.
func TestEndpointHealth(t *testing.T) {
	a, _ := startCluster(t, 1)
	dead := kvdtest.FreeAddrs(t, 1)[0]
	out, errOut, code := kvctlAt(a[0].Addr, "", "endpoint", "health")
	if code != 0 || !strings.HasPrefix(out, a[0].Addr+" is healthy: successfully committed proposal: took = ") || errOut != "" {
		t.Fatalf("healthy: exit %d, %q %q", code, out, errOut)
	}
	out, errOut, code = kvctlAt(a[0].Addr+","+dead, "", "endpoint", "health")
	if code != 1 || !strings.Contains(errOut, dead+" is unhealthy: failed to commit proposal: ") ||
		!strings.Contains(errOut, "connection refused") || !strings.Contains(out, a[0].Addr+" is healthy") {
		t.Fatalf("one dead: exit %d, %q %q", code, out, errOut)
	}
	out, _, code = kvctlAt(a[0].Addr+","+dead, "", "-w", "json", "endpoint", "health")
	var hs []endpointHealth
	if err := json.Unmarshal([]byte(out), &hs); code != 1 || err != nil || len(hs) != 2 {
		t.Fatalf("-w json: exit %d, %v, %q", code, err, out)
	}
	if !hs[0].Health || hs[0].Took == "" || hs[1].Health || !strings.Contains(hs[1].Error, "connection refused") {
		t.Errorf("-w json: %+v", hs)
	}
}

// TestClusterIDFlag: --cluster-id makes kvctl skip a first endpoint of
// another cluster (without it, that cluster would be used), and takes only
// a hex id.
func TestClusterIDFlag(t *testing.T) {
	a, idA := startCluster(t, 1)
	b, _ := startCluster(t, 1)
	both := b[0].Addr + "," + a[0].Addr
	mustKvctl(t, both, "--cluster-id", idA.String(), "put", "k", "a")
	if out := mustKvctl(t, a[0].Addr, "get", "k"); out != "a\n" {
		t.Fatalf("a's k: %q", out)
	}
	if _, _, code := kvctlAt(b[0].Addr, "", "get", "k"); code != 1 {
		t.Fatalf("b's k exists: the write went to the wrong cluster")
	}
	_, errOut, code := kvctlAt(b[0].Addr, "", "--cluster-id", idA.String(), "get", "k")
	if code != 1 || !strings.Contains(errOut, "wrong cluster") || !strings.Contains(errOut, idA.String()) {
		t.Fatalf("b alone with a's id: exit %d, %q", code, errOut)
	}
	if _, errOut, code := kvctlAt(a[0].Addr, "", "--cluster-id", "xyz", "get", "k"); code != 2 || !strings.Contains(errOut, "cluster id") {
		t.Fatalf("--cluster-id xyz: exit %d, %q", code, errOut)
	}
}
