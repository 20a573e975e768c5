package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
)

// kvctlAt runs kvctl in-process against endpoint with stdin, and returns
// its stdout, stderr and exit status.
func kvctlAt(endpoint, stdin string, args ...string) (string, string, int) {
	var out, errOut bytes.Buffer
	err := run(append([]string{"--endpoints", endpoint}, args...), strings.NewReader(stdin), &out, &errOut)
	code := report(err, &errOut)
	return out.String(), errOut.String(), code
}

func startNode(t *testing.T) string {
	t.Helper()
	nodes := kvdtest.StartCluster(t, 1, kvdtest.Options{})
	kvdtest.WaitLeader(t, nodes, 10*time.Second)
	return nodes[0].Addr
}

// version returns key's version as kvctl -w json get reports it.
func version(t *testing.T, ep, key string) uint64 {
	t.Helper()
	out, errOut, code := kvctlAt(ep, "", "-w", "json", "get", key)
	var kv struct {
		ModRevision uint64 `json:"mod_revision"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &kv) != nil {
		t.Fatalf("get %s: exit %d, %q %q", key, code, out, errOut)
	}
	return kv.ModRevision
}

// TestConditionalPutAndDel: put/del --if-mod-revision succeed at the key's
// version and exit 1 otherwise, naming the version, changing nothing.
func TestConditionalPutAndDel(t *testing.T) {
	ep := startNode(t)
	must := func(args ...string) string { t.Helper(); return mustKvctl(t, ep, args...) }
	conflict := func(want string, args ...string) {
		t.Helper()
		out, errOut, code := kvctlAt(ep, "", args...)
		if code != 1 || out != "" || !strings.Contains(errOut, want) {
			t.Fatalf("kvctl %v: exit %d, stdout %q, stderr %q; want exit 1 and %q", args, code, out, errOut, want)
		}
	}
	if out := must("put", "--if-mod-revision", "0", "k", "v1"); out != "OK\n" {
		t.Fatalf("create: %q", out)
	}
	v1 := version(t, ep, "k")
	conflict(fmt.Sprintf(`kvctl: kvd: conflict: key "k" exists at mod revision %d (expected it absent)`, v1),
		"put", "--if-mod-revision", "0", "k", "again")
	must("put", "k", "v2", "--if-mod-revision", fmt.Sprint(v1)) // flags after the arguments too
	v2 := version(t, ep, "k")
	conflict(fmt.Sprintf(`kvctl: kvd: conflict: key "k" is at mod revision %d, not %d`, v2, v1), "put", "--if-mod-revision", fmt.Sprint(v1), "k", "v3")
	conflict(fmt.Sprintf(`kvctl: kvd: conflict: key "k" is at mod revision %d, not %d`, v2, v1), "del", "--if-mod-revision", fmt.Sprint(v1), "k")
	if out := must("get", "k"); out != "v2\n" {
		t.Fatalf("after the conflicts: %q", out)
	}
	if out := must("-w", "json", "put", "--if-mod-revision", fmt.Sprint(v2), "k", "v3"); !strings.Contains(out, `"revision"`) {
		t.Fatalf("json put: %q", out)
	}
	v3 := version(t, ep, "k")
	if out := must("del", "--if-mod-revision", fmt.Sprint(v3), "k"); out != "1\n" {
		t.Fatalf("conditional del: %q", out)
	}
	conflict(fmt.Sprintf(`kvctl: kvd: conflict: key "k" does not exist (expected mod revision %d)`, v3), "del", "--if-mod-revision", fmt.Sprint(v3), "k")
	// Usage errors: exit 2.
	for _, args := range [][]string{{"get", "--if-mod-revision", "1", "k"}, {"put", "--if-mod-revision", "x", "k", "v"}, {"put", "--if-mod-revision", "-1", "k", "v"}} {
		if _, errOut, code := kvctlAt(ep, "", args...); code != 2 {
			t.Errorf("kvctl %v: exit %d (%s), want 2", args, code, errOut)
		}
	}
}

// TestTxnCommand: kvctl txn reads the documented format from stdin, runs
// the right branch and prints etcdctl's way (or JSON).
func TestTxnCommand(t *testing.T) {
	ep := startNode(t)
	if _, errOut, code := kvctlAt(ep, "", "put", "a", "1"); code != 0 {
		t.Fatal(errOut)
	}
	va := version(t, ep, "a")
	in := fmt.Sprintf(`# move a to b if a is unchanged and b does not exist
version("a") = "%d"
missing(b)
value("a") != "2"

get a
put b "one and only"
del a
get a

put failed yes
`, va)
	out, errOut, code := kvctlAt(ep, in, "txn")
	if want := "SUCCESS\n\na\n1\n\nOK\n\n1\n\n"; code != 0 || out != want {
		t.Fatalf("txn: exit %d, stdout %q (want %q), stderr %q", code, out, want, errOut)
	}
	if out, _, _ := kvctlAt(ep, "", "get", "b"); out != "one and only\n" {
		t.Fatalf("b = %q", out)
	}
	// The same again: a is gone, so the else branch runs.
	out, errOut, code = kvctlAt(ep, in, "-w", "json", "txn")
	var r struct {
		Succeeded bool
		Results   []struct {
			Op, Key string
			Version uint64
		}
	}
	if code != 0 || json.Unmarshal([]byte(out), &r) != nil || r.Succeeded || len(r.Results) != 1 || r.Results[0].Op != "put" || r.Results[0].Key != "failed" {
		t.Fatalf("second txn: exit %d, %q %q", code, out, errOut)
	}
	// Bad input: a usage error naming the line; refused transactions exit 1.
	for _, tc := range []struct {
		in, want string
		code     int
	}{
		{`version(a) == "1"` + "\n", "line 1: not a compare", 2},
		{`version(a) = "x"` + "\n", `line 1: version "x"`, 2},
		{"\nput a\n", "line 2: not an operation", 2},
		{"\nput \"a b\n", "bad quoted string", 2},
		{"\nget a\n\nget b\n\nget c\n", "line 6: more than three sections", 2},
		{"\nput k 1\ndel k\n", `duplicate key given in txn request: "k"`, 1},
	} {
		_, errOut, code := kvctlAt(ep, tc.in, "txn")
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("txn of %q: exit %d, %q; want exit %d saying %q", tc.in, code, errOut, tc.code, tc.want)
		}
	}
}

// TestParseTxn: the line format's grammar, without a server.
func TestParseTxn(t *testing.T) {
	tx, labels, err := parseTxn(strings.NewReader(`ver("k 1") > "3"
val(k) < "\x00"
exists(e)
create(c) = "4"
mod(m) != "5"
lease(l) = "6"

put "k 1" "v\n"
delete x
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(tx.If) != 6 || len(tx.Then) != 2 || len(tx.Else) != 0 || fmt.Sprint(labels) != "[[{put k 1 false false [[] []]} {del x false false [[] []]}] []]" {
		t.Fatalf("parsed %d compares, %d then, %d else; labels %v", len(tx.If), len(tx.Then), len(tx.Else), labels)
	}
	want := client.Txn{
		If: []client.Cmp{client.CompareVersion([]byte("k 1"), client.CmpGreater, 3), client.CompareValue([]byte("k"), client.CmpLess, []byte{0}),
			client.KeyExists([]byte("e")), client.CompareCreateRevision([]byte("c"), client.CmpEqual, 4),
			client.CompareModRevision([]byte("m"), client.CmpNotEqual, 5), client.CompareLease([]byte("l"), client.CmpEqual, 6)},
		Then: []client.Op{client.OpPut([]byte("k 1"), []byte("v\n")), client.OpDelete([]byte("x"))},
	}
	if fmt.Sprint(tx) != fmt.Sprint(want) {
		t.Fatalf("parsed\n%v\nwant\n%v", tx, want)
	}
}

// TestTxnVersionIsEtcds: ver("k") is the key's version as etcd counts it
// (writes since creation), so a freshly created key is at version 1 and
// the success branch runs; create() and mod() are its revisions.
func TestTxnVersionIsEtcds(t *testing.T) {
	ep := startNode(t)
	must := func(stdin string, args ...string) string {
		t.Helper()
		out, errOut, code := kvctlAt(ep, stdin, args...)
		if code != 0 {
			t.Fatalf("kvctl %v: exit %d, %q", args, code, errOut)
		}
		return out
	}
	must("", "put", "other", "x") // the store revision moves past 1
	must("", "put", "k", "v1")
	rev := version(t, ep, "k")
	if rev < 2 {
		t.Fatalf("k's mod revision %d: want it past other's", rev)
	}
	if got := must("ver(\"k\") = \"1\"\n\nput ok yes\n\nput ok no\n", "txn"); got != "SUCCESS\n\nOK\n" && !strings.HasPrefix(got, "SUCCESS") {
		t.Fatalf("ver(k) = 1 on a fresh key: %q, want SUCCESS", got)
	}
	in := fmt.Sprintf("create(\"k\") = \"%d\"\nmod(\"k\") = \"%d\"\nver(\"k\") = \"1\"\n\nput k v2\n\n", rev, rev)
	if got := must(in, "txn"); !strings.HasPrefix(got, "SUCCESS") {
		t.Fatalf("create/mod = %d: %q, want SUCCESS", rev, got)
	}
	if got := must("ver(\"k\") = \"2\"\n\n\n\n", "txn"); !strings.HasPrefix(got, "SUCCESS") {
		t.Fatalf("ver(k) = 2 after a second write: %q, want SUCCESS", got)
	}
}

// TestCompaction: kvctl compaction compacts the history as etcdctl's
// does, and refuses a revision past the store's or already compacted.
func TestCompaction(t *testing.T) {
	ep := startNode(t)
	for i := range 3 {
		if _, errOut, code := kvctlAt(ep, "", "put", "k", fmt.Sprint(i)); code != 0 {
			t.Fatal(errOut)
		}
	}
	rev := version(t, ep, "k")
	if out, errOut, code := kvctlAt(ep, "", "compaction", fmt.Sprint(rev-1)); code != 0 || out != fmt.Sprintf("compacted revision %d\n", rev-1) {
		t.Fatalf("compaction %d: exit %d, %q %q", rev-1, code, out, errOut)
	}
	for _, tc := range []struct{ rev, want string }{
		{fmt.Sprint(rev - 1), "required revision has been compacted"},
		{fmt.Sprint(rev + 10), "required revision is a future revision"},
		{"x", "want a positive integer"},
	} {
		if _, errOut, code := kvctlAt(ep, "", "compaction", tc.rev); code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("compaction %s: exit %d, %q; want an error saying %q", tc.rev, code, errOut, tc.want)
		}
	}
}

// TestGetAtRevision: get --rev N shows the keys as they were at revision
// N, with etcd's metadata in JSON; below the compaction it fails as
// compacted, past the store's revision as a future revision.
func TestGetAtRevision(t *testing.T) {
	ep := startNode(t)
	run := func(args ...string) (string, string, int) { return kvctlAt(ep, "", args...) }
	run("put", "k", "v1")
	first := version(t, ep, "k")
	run("put", "k", "v2")
	run("put", "k2", "x")
	if out, errOut, code := run("get", "--rev", fmt.Sprint(first), "k"); code != 0 || out != "k\nv1\n" {
		t.Fatalf("get --rev %d k: exit %d, %q %q", first, code, out, errOut)
	}
	out, _, code := run("-w", "json", "get", "--rev", fmt.Sprint(first+1), "--prefix", "k")
	var r struct {
		KVs      []struct{ Key string }
		Revision uint64
	}
	if code != 0 || json.Unmarshal([]byte(out), &r) != nil {
		t.Fatalf("get -w json --rev: exit %d, %q", code, out)
	}
	if len(r.KVs) != 1 || r.Revision != first+1 {
		t.Fatalf("at %d: %q", first+1, out)
	}
	if !strings.Contains(out, fmt.Sprintf(`"create_revision": %d`, first)) || !strings.Contains(out, `"version": 2`) {
		t.Fatalf("k at %d: want created at %d, version 2: %s", first+1, first, out)
	}
	if _, errOut, code := run("get", "--rev", fmt.Sprint(first), "k2"); code != 1 || !strings.Contains(errOut, "key not found") {
		t.Errorf("get --rev %d of a key created later: exit %d, %q; want 1, not found", first, code, errOut)
	}
	run("compaction", fmt.Sprint(first+1))
	for rev, want := range map[uint64]string{first: "required revision has been compacted", first + 100: "required revision is a future revision"} {
		if _, errOut, code := run("get", "--rev", fmt.Sprint(rev), "k"); code == 0 || !strings.Contains(errOut, want) {
			t.Errorf("get --rev %d: exit %d, %q; want %q", rev, code, errOut, want)
		}
	}
}

// TestDelRange: del --prefix, --from-key and KEY END delete ranges in one
// revision, printing the count, and with --prev-kv the deleted keys and
// values, as etcdctl's del; put --prev-kv prints the value it replaced.
func TestDelRange(t *testing.T) {
	ep := startNode(t)
	must := func(args ...string) string {
		t.Helper()
		out, errOut, code := kvctlAt(ep, "", args...)
		if code != 0 {
			t.Fatalf("kvctl %v: exit %d, %q", args, code, errOut)
		}
		return out
	}
	for _, k := range []string{"a", "p/1", "p/2", "q", "r", "s"} {
		must("put", k, "v"+k)
	}
	if got := must("put", "--prev-kv", "a", "new"); got != "OK\na\nva\n" {
		t.Errorf("put --prev-kv: %q", got)
	}
	if got := must("del", "--prefix", "--prev-kv", "p/"); got != "2\np/1\nvp/1\np/2\nvp/2\n" {
		t.Errorf("del --prefix p/: %q", got)
	}
	if got := must("del", "q", "r"); got != "1\n" {
		t.Errorf("del q r: %q", got)
	}
	if got := must("del", "--from-key", "r"); got != "2\n" {
		t.Errorf("del --from-key r: %q", got)
	}
	if got := must("get", "--prefix", ""); got != "a\nnew\n" {
		t.Errorf("left: %q", got)
	}
	if _, errOut, code := kvctlAt(ep, "", "del", "--prefix", "--if-mod-revision", "1", "a"); code != 2 || errOut == "" {
		t.Errorf("del --prefix --if-mod-revision: exit %d, %q; want a usage error", code, errOut)
	}
}

// TestGetPrintsEtcdMetadata: get -w json prints the key's create and mod
// revisions, version and lease, as etcdctl's does, from a one-sided read.
func TestGetPrintsEtcdMetadata(t *testing.T) {
	ep := startNode(t)
	kvctlAt(ep, "", "put", "other", "x")
	kvctlAt(ep, "", "put", "k", "1")
	kvctlAt(ep, "", "put", "k", "2")
	out, errOut, code := kvctlAt(ep, "", "-w", "json", "get", "k")
	var kv struct {
		CreateRevision uint64 `json:"create_revision"`
		ModRevision    uint64 `json:"mod_revision"`
		Version        uint64 `json:"version"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &kv) != nil {
		t.Fatalf("get -w json: exit %d, %q %q", code, out, errOut)
	}
	if kv.CreateRevision != 2 || kv.ModRevision != 3 || kv.Version != 2 {
		t.Fatalf("k: %+v, want created at 2, modified at 3, version 2", kv)
	}
}

// TestTxnLeaseZero: lease("k") = "0" holds for a key on no lease.
func TestTxnLeaseZero(t *testing.T) {
	tx, _, err := parseTxn(strings.NewReader("lease(k) = \"0\"\n"))
	if err != nil || fmt.Sprint(tx.If) != fmt.Sprint([]client.Cmp{client.CompareLease([]byte("k"), client.CmpEqual, 0)}) {
		t.Fatalf("lease(k) = 0: %v, %v", tx.If, err)
	}
}

// TestParseTxnEtcdOps: etcdctl's get/del/put flags inside a txn, and kvd's
// txn { ... } for a nested transaction; bad lines are usage errors naming
// the line.
func TestParseTxnEtcdOps(t *testing.T) {
	tx, labels, err := parseTxn(strings.NewReader(`c("a") = "0"
m("b") > "1"

put a 1 --lease=7
put b --ignore-value
put c v --ignore-lease
del job/ --prefix --prev-kv
del x z
get k --prefix --limit 2 --keys-only
get k --from-key --count-only
txn {
exists("a")

get a
txn {

del q
}

put e 1
}

get o
`))
	if err != nil {
		t.Fatal(err)
	}
	want := client.Txn{
		If: []client.Cmp{client.CompareCreateRevision([]byte("a"), client.CmpEqual, 0), client.CompareModRevision([]byte("b"), client.CmpGreater, 1)},
		Then: []client.Op{
			client.OpPut([]byte("a"), []byte("1"), client.WithLease(7)),
			client.OpPut([]byte("b"), nil, client.WithIgnoreValue()),
			client.OpPut([]byte("c"), []byte("v"), client.WithIgnoreLease()),
			client.OpDeletePrefix([]byte("job/"), client.WithPrevKV()),
			client.OpDeleteRange([]byte("x"), []byte("z")),
			client.OpPrefix([]byte("k"), client.WithLimit(2), client.WithKeysOnly()),
			client.OpRange([]byte("k"), nil, client.WithCountOnly()),
			client.OpTxn([]client.Cmp{client.KeyExists([]byte("a"))},
				[]client.Op{client.OpGet([]byte("a")), client.OpTxn(nil, []client.Op{client.OpDelete([]byte("q"))}, nil)},
				[]client.Op{client.OpPut([]byte("e"), []byte("1"))}),
		},
		Else: []client.Op{client.OpGet([]byte("o"))},
	}
	if !reflect.DeepEqual(tx, want) {
		t.Fatalf("parsed\n%v\nwant\n%v", tx, want)
	}
	if got := labels[0][7].sub[0][1].kind; got != "txn" || labels[0][3].kind != "del-range" || labels[0][5].kind != "range" || !labels[0][6].countOnly {
		t.Fatalf("labels %+v", labels)
	}
	for _, tc := range []struct{ in, want string }{
		{"\nput a\n", "line 2: not an operation"},
		{"\nget a --limit\n", "--limit needs a value"},
		{"\nget a b --prefix\n", "give END, --prefix or --from-key, not two of them"},
		{"\ndel a --keys-only\n", "del does not take --keys-only in a txn"},
		{"\nput a 1 --prev-kv\n", "put does not take --prev-kv in a txn"},
		{"\ntxn {\n\nget a\n", "txn { without its closing }"},
		{"\ntxn {\n\nput a b c\n}\n", "line 4: not an operation"},
	} {
		if _, _, err := parseTxn(strings.NewReader(tc.in)); !errors.As(err, new(usageError)) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("txn of %q: %v, want a usage error saying %q", tc.in, err, tc.want)
		}
	}
}

// TestTxnEtcdOpsAgainstNode: etcdctl's output for range ops, and JSON with
// a nested response, from a real node; put --ignore-value / --ignore-lease.
func TestTxnEtcdOpsAgainstNode(t *testing.T) {
	ep := startNode(t)
	for _, kv := range [][2]string{{"job/1", "a"}, {"job/2", "b"}, {"x", "1"}} {
		mustKvctl(t, ep, "put", kv[0], kv[1])
	}
	in := "\ndel job/ --prefix --prev-kv\nget a --from-key --keys-only\nget job/ --prefix --count-only\n"
	out, errOut, code := kvctlAt(ep, in, "txn")
	if want := "SUCCESS\n\n2\njob/1\na\njob/2\nb\n\nx\n\n0\n"; code != 0 || out != want {
		t.Fatalf("txn: exit %d, stdout %q (want %q), stderr %q", code, out, want, errOut)
	}
	in = "\ntxn {\nmissing(\"job/1\")\n\nput y --ignore-value\n\nput y 2\n}\n"
	out, errOut, code = kvctlAt(ep, in, "-w", "json", "txn")
	if code != 1 || !strings.Contains(errOut, "key not found") {
		t.Fatalf("put --ignore-value of an absent key in a nested txn: exit %d, %q %q", code, out, errOut)
	}
	in = "\ntxn {\nmissing(\"job/1\")\n\nput x --ignore-value\nget x\n}\n"
	out, errOut, code = kvctlAt(ep, in, "-w", "json", "txn")
	var r struct {
		Succeeded bool
		Revision  uint64
		Results   []struct {
			Op  string
			Txn *struct {
				Succeeded bool
				Revision  uint64
				Results   []struct {
					Op, Key, Value string
					Version        uint64
				}
			}
		}
	}
	if code != 0 || json.Unmarshal([]byte(out), &r) != nil || len(r.Results) != 1 || r.Results[0].Op != "txn" {
		t.Fatalf("nested txn: exit %d, %q %q", code, out, errOut)
	}
	if in := r.Results[0].Txn; in == nil || !in.Succeeded || in.Revision != r.Revision || len(in.Results) != 2 ||
		in.Results[1].Value != "1" || in.Results[1].Version != 2 {
		t.Fatalf("nested response: %s", out)
	}
	// put --ignore-value and its errors, as etcdctl's.
	mustKvctl(t, ep, "put", "w", "1")
	if out, errOut, code := kvctlAt(ep, "", "put", "--ignore-value", "x"); code != 0 || out != "OK\n" {
		t.Fatalf("put --ignore-value x: exit %d, %q %q", code, out, errOut)
	}
	if _, errOut, code := kvctlAt(ep, "", "put", "--ignore-value", "nope"); code != 1 || !strings.Contains(errOut, "key not found") {
		t.Fatalf("put --ignore-value of an absent key: exit %d, %q", code, errOut)
	}
	if _, errOut, code := kvctlAt(ep, "", "put", "--ignore-value", "x", "v"); code != 1 || !strings.Contains(errOut, "value is provided") {
		t.Fatalf("put --ignore-value with a value: exit %d, %q", code, errOut)
	}
	if out, _, _ := kvctlAt(ep, "", "get", "x"); out != "1\n" {
		t.Fatalf("x = %q after put --ignore-value, want 1", out)
	}
	// A sorted range in a txn: the key written last (x, by --ignore-value).
	in = "\nget a --from-key --sort-by MODIFY --order=DESCEND --keys-only --limit 1\n"
	if out, errOut, code := kvctlAt(ep, in, "txn"); code != 0 || out != "SUCCESS\n\nx\n" {
		t.Fatalf("sorted get in a txn: exit %d, %q %q", code, out, errOut)
	}
}
