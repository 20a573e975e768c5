package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// mustKvctl runs kvctl against ep and returns its stdout; a non-zero exit
// fails the test.
func mustKvctl(t *testing.T, ep string, args ...string) string {
	t.Helper()
	out, errOut, code := kvctlAt(ep, "", args...)
	if code != 0 {
		t.Fatalf("kvctl %v: exit %d: %s", args, code, errOut)
	}
	return out
}

// TestGetRange: get --prefix, --from/--to, --limit, --keys-only and
// --count print what docs/kvctl.md shows, and bad combinations are usage
// errors (exit 2).
func TestGetRange(t *testing.T) {
	ep := startNode(t)
	must := func(args ...string) string { t.Helper(); return mustKvctl(t, ep, args...) }
	for _, k := range []string{"app/a", "app/b", "app/c", "apq", "b"} {
		must("put", k, "v-"+k)
	}
	must("del", "app/b")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"get", "--prefix", "app/"}, "app/a\nv-app/a\napp/c\nv-app/c\n"},
		{[]string{"get", "app/", "--prefix", "--keys-only"}, "app/a\napp/c\n"},
		{[]string{"get", "--from", "app/c", "--to", "b"}, "app/c\nv-app/c\napq\nv-apq\n"},
		{[]string{"get", "--from", "apq"}, "apq\nv-apq\nb\nv-b\n"},
		{[]string{"get", "--from", "", "--limit", "2", "--keys-only"}, "app/a\napp/c\n"},
		{[]string{"get", "--prefix", "", "--count"}, "4\n"},
		{[]string{"get", "--prefix", "app/", "--count", "--limit", "1"}, "2\n"},
		{[]string{"get", "--prefix", "zzz"}, ""},
		{[]string{"get", "--from", "b", "--to", "a"}, ""},
	} {
		if got := must(tc.args...); got != tc.want {
			t.Errorf("kvctl %v: %q, want %q", tc.args, got, tc.want)
		}
	}
	if got, want := must("-w", "table", "get", "--prefix", "apq", "--keys-only"), fmt.Sprintf("KEY  MOD_REVISION\napq  %d\n", version(t, ep, "apq")); got != want {
		t.Errorf("-w table get --prefix apq --keys-only: %q, want %q", got, want)
	}
	var js scanJSON
	if err := json.Unmarshal([]byte(must("-w", "json", "get", "--prefix", "ap", "--limit", "2")), &js); err != nil {
		t.Fatal(err)
	}
	if len(js.KVs) != 2 || js.KVs[1].Key != "app/c" || deref(js.KVs[1].Value) != "v-app/c" || !js.More || js.Next != "apq" || js.Count != 3 || js.Revision == 0 {
		t.Fatalf("-w json get --prefix ap --limit 2: %+v", js)
	}
	for _, args := range [][]string{
		{"get", "--prefix"},
		{"get", "--prefix", "a", "b"},
		{"get", "--prefix", "a", "--from", "a"},
		{"get", "--from", "a", "k"},
		{"get", "--prefix", "a", "--keys-only", "--count"},
		{"get", "--prefix", "a", "--limit", "-1"},
		{"get", "--limit", "3"},
		{"put", "--prefix", "a", "v"},
		{"-w", "raw", "get", "--prefix", "a"},
	} {
		if _, errOut, code := kvctlAt(ep, "", args...); code != 2 || !strings.Contains(errOut, "(see kvctl -h)") {
			t.Errorf("kvctl %v: exit %d, stderr %q; want a usage error (exit 2)", args, code, errOut)
		}
	}
}

// TestGetSorted: get's etcdctl options --sort-by, --order, --count-only,
// --from-key and get KEY END, and their usage errors.
func TestGetSorted(t *testing.T) {
	ep := startNode(t)
	must := func(args ...string) string { t.Helper(); return mustKvctl(t, ep, args...) }
	// By key: a (mod 4, version 2, value "2"), b (mod 2, version 1,
	// value "3"), c (mod 3, version 1, value "1").
	for _, kv := range [][2]string{{"s/a", "9"}, {"s/b", "3"}, {"s/c", "1"}, {"s/a", "2"}} {
		must("put", kv[0], kv[1])
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"get", "--prefix", "s/", "--sort-by", "MODIFY", "--order", "DESCEND", "--keys-only"}, "s/a\ns/c\ns/b\n"},
		{[]string{"get", "--prefix", "s/", "--sort-by=modify", "--keys-only"}, "s/b\ns/c\ns/a\n"},
		{[]string{"get", "--prefix", "s/", "--sort-by=VALUE"}, "s/c\n1\ns/a\n2\ns/b\n3\n"},
		{[]string{"get", "--prefix", "s/", "--sort-by=VERSION", "--order=DESCEND", "--keys-only"}, "s/a\ns/b\ns/c\n"},
		{[]string{"get", "--prefix", "s/", "--sort-by=CREATE", "--order=DESCEND", "--keys-only"}, "s/c\ns/b\ns/a\n"},
		{[]string{"get", "--prefix", "s/", "--order=DESCEND", "--keys-only", "--limit", "2"}, "s/c\ns/b\n"},
		{[]string{"get", "--prefix", "s/", "--sort-by=KEY", "--order=ASCEND", "--keys-only"}, "s/a\ns/b\ns/c\n"},
		{[]string{"get", "s/b", "s/d", "--keys-only"}, "s/b\ns/c\n"},
		{[]string{"get", "s/b", "s/c"}, "s/b\n3\n"},
		{[]string{"get", "--from-key", "s/b", "--keys-only"}, "s/b\ns/c\n"},
		{[]string{"get", "--prefix", "s/", "--count-only", "--limit", "1"}, "3\n"},
		{[]string{"get", "s/x", "s/z"}, ""},
	} {
		if got := must(tc.args...); got != tc.want {
			t.Errorf("kvctl %v: %q, want %q", tc.args, got, tc.want)
		}
	}
	var js scanJSON
	if err := json.Unmarshal([]byte(must("-w", "json", "get", "--prefix", "s/", "--sort-by", "MODIFY", "--limit", "1")), &js); err != nil {
		t.Fatal(err)
	}
	if len(js.KVs) != 1 || js.KVs[0].Key != "s/b" || !js.More || js.Count != 3 || js.Next != "" {
		t.Fatalf("-w json get --prefix s/ --sort-by MODIFY --limit 1: %+v", js)
	}
	for _, args := range [][]string{
		{"get", "--prefix", "s/", "--sort-by", "SIZE"},
		{"get", "--prefix", "s/", "--order", "UP"},
		{"get", "--prefix", "s/", "--keys-only", "--count-only"},
		{"get", "--prefix", "s/", "--from-key"},
		{"get", "--from-key", "a", "b"},
		{"get", "--prefix", "s/", "s/z"},
		{"get", "--sort-by", "KEY"},
		{"put", "--sort-by", "KEY", "k", "v"},
		{"watch", "--order", "DESCEND", "k"},
	} {
		if _, errOut, code := kvctlAt(ep, "", args...); code != 2 || !strings.Contains(errOut, "(see kvctl -h)") {
			t.Errorf("kvctl %v: exit %d, stderr %q; want a usage error (exit 2)", args, code, errOut)
		}
	}
}

// TestGetOneKeyRangeAtMaxKey: `kvctl get KEY --keys-only|--count|--limit N`
// scans the one-key range [KEY, KEY+"\x00"), which works for a key of the
// longest length (1024 bytes, which put and get accept) too, though that
// end bound is 1025 bytes: it must not be refused as "key too large".
func TestGetOneKeyRangeAtMaxKey(t *testing.T) {
	ep := startNode(t)
	key := strings.Repeat("k", 1024)
	mustKvctl(t, ep, "put", key, "v")
	if got := mustKvctl(t, ep, "get", key); got != "v\n" {
		t.Fatalf("get: %q", got)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"get", key, "--count"}, "1\n"},
		{[]string{"get", key, "--keys-only"}, key + "\n"},
		{[]string{"get", key, "--limit", "1"}, key + "\nv\n"},
	} {
		out, errOut, code := kvctlAt(ep, "", tc.args...)
		if code != 0 || out != tc.want {
			t.Errorf("kvctl %s %s: exit %d, stdout %.40q, stderr %q; want %.40q", tc.args[0], strings.Join(tc.args[2:], " "), code, out, strings.TrimSpace(errOut), tc.want)
		}
	}
}

// binScan is -w json get's output, read whichever way a key is printed:
// as a string, or (if kvctl did so for binary keys) base64 in key_base64
// and next_base64.
type binScan struct {
	KVs []struct {
		Key       string `json:"key"`
		KeyBase64 []byte `json:"key_base64"`
		Value     string `json:"value"`
	} `json:"kvs"`
	More       bool   `json:"more"`
	Next       string `json:"next"`
	NextBase64 []byte `json:"next_base64"`
}

func (b *binScan) key(i int) string {
	if b.KVs[i].KeyBase64 != nil {
		return string(b.KVs[i].KeyBase64)
	}
	return b.KVs[i].Key
}

func (b *binScan) next() string {
	if b.NextBase64 != nil {
		return string(b.NextBase64)
	}
	return b.Next
}

// TestGetRangeJSONBinaryKeys: -w json get --prefix prints each key and
// "next", "the key to continue from (--from NEXT)", as stored, binary keys
// too, so continuing from "next" goes on where the page ended. As JSON
// strings, a binary key would become U+FFFD, and continuing from "next"
// would repeat a key of the page before.
func TestGetRangeJSONBinaryKeys(t *testing.T) {
	ep := startNode(t)
	mustKvctl(t, ep, "put", "p\xf0", "1")
	mustKvctl(t, ep, "put", "p\xff", "2")
	var page1 binScan
	if err := json.Unmarshal([]byte(mustKvctl(t, ep, "-w", "json", "get", "--prefix", "p", "--limit", "1")), &page1); err != nil {
		t.Fatal(err)
	}
	if len(page1.KVs) != 1 || page1.key(0) != "p\xf0" || !page1.More || page1.next() != "p\xff" {
		t.Errorf("page 1: %+v; want key %q, more, next %q", page1, "p\xf0", "p\xff")
	}
	// Continue as docs/kvctl.md says: --from NEXT.
	var page2 binScan
	if err := json.Unmarshal([]byte(mustKvctl(t, ep, "-w", "json", "get", "--from", page1.next(), "--to", "q", "--limit", "1")), &page2); err != nil {
		t.Fatal(err)
	}
	if len(page2.KVs) != 1 || page2.key(0) != "p\xff" || page2.KVs[0].Value != "2" {
		t.Errorf("page 2 from next %q: %+v; want p\\xff=2, not the first key again", page1.next(), page2.KVs)
	}
}

// TestMgetAtomic: mget --atomic prints what mget prints (read as one
// snapshot: one-sided when every key exists, by RPC when one is missing)
// and applies to mget only.
func TestMgetAtomic(t *testing.T) {
	ep := startNode(t)
	mustKvctl(t, ep, "put", "a", "1")
	mustKvctl(t, ep, "put", "b", "2")
	if got := mustKvctl(t, ep, "mget", "--atomic", "a", "b"); got != "a\n1\nb\n2\n" {
		t.Errorf("mget --atomic a b: %q", got)
	}
	out, errOut, code := kvctlAt(ep, "", "mget", "--atomic", "b", "nope", "a")
	if code != 1 || out != "b\n2\na\n1\n" || !strings.Contains(errOut, "nope") {
		t.Errorf("mget --atomic with a missing key: exit %d, %q, %q", code, out, errOut)
	}
	if _, errOut, code := kvctlAt(ep, "", "get", "--atomic", "a"); code != 2 || !strings.Contains(errOut, "mget only") {
		t.Errorf("get --atomic: exit %d, %q; want a usage error", code, errOut)
	}
}

// deref is *p, or "" for nil.
func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
