package main_test

import (
	"encoding/json"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// TestEtcdDiffAgainstRealEtcd runs one etcdctl script (with Debian's
// etcdctl 3.4 and with 3.7) and one clientv3 script against a real etcd
// cluster (Debian's etcd 3.4.23, 3 members) and against a 3-node kvd
// cluster serving etcd's API, and compares what they print after
// normalising only ids, raft terms and indexes, and absolute revisions
// (normaliser). The steps whose outputs differ must be exactly those of
// knownDiffs: a new difference fails, and so does one that is gone.
func TestEtcdDiffAgainstRealEtcd(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping the process test in -short mode")
	}
	ctls := etcdctls(t)
	etcdBin := etcdServerBin(t)
	// etcd's followers answer lease calls with the revision they have
	// applied, which may lag the leader's: the script talks to the leader.
	etcd := []string{etcdLeader(t, ctls["3.7"], startRealEtcd(t, etcdBin, ctls["3.7"]))}
	kvd := startEtcdEnv(t, ctls["3.7"]).nodeURLs
	got := map[string]bool{}
	for _, v := range []string{"3.4", "3.7"} {
		p := "/diff-" + v + "/"
		compareSteps(t, "etcdctl", runCtlScript(t, ctls[v], etcd, p), runCtlScript(t, ctls[v], kvd, p), got)
	}
	compareSteps(t, "clientv3", runGoScript(t, etcd, "/diff-go/"), runGoScript(t, kvd, "/diff-go/"), got)
	checkKnownDiffs(t, got)
}

// etcdLeader is the client endpoint of the leader of the etcd cluster at
// endpoints.
func etcdLeader(t *testing.T, ctl string, endpoints []string) string {
	t.Helper()
	var st []endpointStatus
	out := etcdctlAt(t, ctl, endpoints...).ok("endpoint", "status", "-w", "json")
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("endpoint status -w json: %v\n%s", err, out)
	}
	for _, s := range st {
		if s.Status.Leader != 0 && s.Status.Leader == s.Status.Header.MemberID {
			return strings.TrimPrefix(s.Endpoint, "http://")
		}
	}
	t.Fatalf("no leader in endpoint status:\n%s", out)
	return ""
}

// compareSteps records in got every step of script whose outputs differ,
// and logs both outputs.
func compareSteps(t *testing.T, script string, etcd, kvd []stepOut, got map[string]bool) {
	t.Helper()
	for i := range etcd {
		if etcd[i].out == kvd[i].out {
			continue
		}
		key := script + ": " + etcd[i].name
		got[key] = true
		t.Logf("%s differs:\netcd:\n%s\nkvd:\n%s", key, indent(etcd[i].out), indent(kvd[i].out))
	}
}

func indent(s string) string { return "    " + strings.ReplaceAll(s, "\n", "\n    ") }

// knownDiffs are the steps whose outputs differ from etcd's, each with
// the row of docs/etcd-compatibility.md (status "differs") that says why.
var knownDiffs = map[string]string{}

// compatDoc is the page knownDiffs' rows are in.
const compatDoc = "../../docs/etcd-compatibility.md"

// checkKnownDiffs fails for a difference not in knownDiffs, for an entry
// of knownDiffs that no longer differs, and for one whose row is not in
// compatDoc with status "differs".
func checkKnownDiffs(t *testing.T, got map[string]bool) {
	t.Helper()
	doc, err := os.ReadFile(compatDoc)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range got {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if _, ok := knownDiffs[k]; !ok {
			t.Errorf("new difference from etcd: %q: fix it, or list it in %s and knownDiffs", k, compatDoc)
		}
	}
	for k, row := range knownDiffs {
		if !got[k] {
			t.Errorf("knownDiffs lists %q, which no longer differs from etcd: remove it (and the note in row %s, if it was its last)", k, row)
		}
		if !regexp.MustCompile("(?m)^\\| `" + regexp.QuoteMeta(row) + "` \\| differs \\|").Match(doc) {
			t.Errorf("knownDiffs' %q points at row %s, which %s lacks (as \"differs\")", k, row, compatDoc)
		}
	}
}
