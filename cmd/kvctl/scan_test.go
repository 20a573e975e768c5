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
	if got, want := must("-w", "table", "get", "--prefix", "apq", "--keys-only"), fmt.Sprintf("KEY  VERSION\napq  %d\n", version(t, ep, "apq")); got != want {
		t.Errorf("-w table get --prefix apq --keys-only: %q, want %q", got, want)
	}
	var js scanJSON
	if err := json.Unmarshal([]byte(must("-w", "json", "get", "--prefix", "ap", "--limit", "2")), &js); err != nil {
		t.Fatal(err)
	}
	if len(js.KVs) != 2 || js.KVs[1].Key != "app/c" || js.KVs[1].Value != "v-app/c" || !js.More || js.Next != "apq" || js.Count != 2 || js.Index == 0 {
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
		if _, errOut, code := kvctlAt(ep, "", args...); code != 2 || !strings.Contains(errOut, "usage") && !strings.Contains(errOut, "--") {
			t.Errorf("kvctl %v: exit %d, stderr %q; want a usage error (exit 2)", args, code, errOut)
		}
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
