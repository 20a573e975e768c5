package main

import (
	"bytes"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/kvd-project/kvd/internal/kvdtest"
)

// jq runs the real jq binary with args on in and returns its output
// without the trailing newline. jq is a test dependency (scripts/deps.sh
// installs it): without it the test fails, never skips.
func jq(t *testing.T, in string, args ...string) string {
	t.Helper()
	path, err := exec.LookPath("jq")
	if err != nil {
		t.Fatalf("jq is not on PATH (run scripts/deps.sh, which make test-go runs): %v", err)
	}
	cmd := exec.Command(path, args...)
	cmd.Stdin = strings.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("jq %v on %q: %v: %s", args, in, err, stderr.String())
	}
	return strings.TrimSuffix(string(out), "\n")
}

// TestJSONIDsRoundTripThroughJq: an ID that -w json prints, taken out by
// jq (which reads JSON numbers as doubles, rounding integers above 2^53),
// names the same lease or member when given back to kvctl, with jq -r or
// without (quoted).
func TestJSONIDsRoundTripThroughJq(t *testing.T) {
	ep := startNode(t)
	must := func(args ...string) string { t.Helper(); return mustKvctl(t, ep, args...) }
	var grant string
	for range 10 { // lease IDs are random: one above 2^53 is the case that matters
		grant = must("-w", "json", "lease", "grant", "60s")
		if id, _ := strconv.ParseUint(jq(t, grant, "-r", ".id"), 10, 64); id > 1<<53 {
			break
		}
	}
	for _, flags := range [][]string{{"-r", ".id"}, {".id"}} {
		id := jq(t, grant, flags...)
		out, errOut, code := kvctlAt(ep, "", "lease", "timetolive", id)
		if code != 0 || !strings.Contains(out, "granted TTL 1m0s") {
			t.Errorf("lease grant -w json | jq %s | lease timetolive: exit %d, %q %q", strings.Join(flags, " "), code, out, errOut)
		}
	}
	const big = 1<<62 + 1 // not a double
	addr := kvdtest.FreeAddrs(t, 1)[0]
	added := must("-w", "json", "member", "add", strconv.FormatUint(big, 10), addr)
	if got := jq(t, added, "-r", ".id"); got != strconv.FormatUint(big, 10) {
		t.Fatalf("member add -w json | jq -r .id: %s, want %d", got, uint64(big))
	}
	listed := must("-w", "json", "member", "list")
	id := jq(t, listed, "-r", ".[] | select(.is_learner) | .id")
	if got := must("member", "remove", id); !strings.Contains(got, "removed member") {
		t.Fatalf("member remove %s: %q", id, got)
	}
	status := must("-w", "json", "status")
	if got, want := jq(t, status, "-r", ".[0].id"), jq(t, status, "-r", ".[0].leader_id"); got != "1" || want != "1" {
		t.Errorf("status -w json | jq: id %s, leader_id %s; want 1 and 1", got, want)
	}
}

// TestParseUint64ID: IDs are read in every form kvctl prints them.
func TestParseUint64ID(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"4211871358463091322", 4211871358463091322, true},
		{`"4211871358463091322"`, 4211871358463091322, true},
		{"0x3a73c2c9f6a4b57a", 0x3a73c2c9f6a4b57a, true},
		{"0X3A73C2C9F6A4B57A", 0x3a73c2c9f6a4b57a, true},
		{"18446744073709551615", 1<<64 - 1, true},
		{"0", 0, false},
		{"0x0", 0, false},
		{"3a73c2c9f6a4b57a", 0, false}, // bare hex: refused, not misread
		{"4.211871358463091e+18", 0, false},
		{"", 0, false},
		{`"`, 0, false},
	} {
		if got, ok := parseUint64ID(tc.in); got != tc.want && tc.ok || ok != tc.ok {
			t.Errorf("parseUint64ID(%q) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// TestJSONEmptyValuePresent: -w json prints "value": "" for an empty
// value, in get, mget, scans, watch and txn, rather than leaving it out
// as if there were none.
func TestJSONEmptyValuePresent(t *testing.T) {
	ep := startNode(t)
	must := func(args ...string) string { t.Helper(); return mustKvctl(t, ep, args...) }
	must("put", "empty", "")
	txn, errOut, code := kvctlAt(ep, "\nget empty\n\n", "-w", "json", "txn")
	if code != 0 {
		t.Fatalf("txn: exit %d: %s", code, errOut)
	}
	for _, tc := range []struct {
		out, filter string
	}{
		{must("-w", "json", "get", "empty"), `.value`},
		{must("-w", "json", "mget", "empty"), `.[0].value`},
		{must("-w", "json", "get", "--prefix", "empty"), `.kvs[0].value`},
		{txn, `.results[0].value`},
	} {
		if got := jq(t, tc.out, "-c", tc.filter); got != `""` {
			t.Errorf("%s of %s: %s, want \"\"", tc.filter, tc.out, got)
		}
	}
	if got := jq(t, must("-w", "json", "get", "--prefix", "empty", "--keys-only"), "-c", ".kvs[0] | has(\"value\")"); got != "false" {
		t.Errorf("--keys-only printed a value: has(value) = %s", got)
	}
}

// TestDelMissingKeyExitsZero: del of a key that does not exist prints 0
// and exits 0, as etcdctl does; a conflict of --if-mod-revision still exits 1.
func TestDelMissingKeyExitsZero(t *testing.T) {
	ep := startNode(t)
	must := func(args ...string) string { t.Helper(); return mustKvctl(t, ep, args...) }
	if got := must("del", "nosuchkey"); got != "0\n" {
		t.Errorf("del nosuchkey: %q, want 0", got)
	}
	if got := jq(t, must("-w", "json", "del", "nosuchkey"), "-c", "."); got != `{"deleted":0,"key":"nosuchkey"}` {
		t.Errorf("-w json del nosuchkey: %s", got)
	}
	if got := must("del", "--if-mod-revision", "0", "nosuchkey"); got != "0\n" {
		t.Errorf("del --if-mod-revision 0 nosuchkey: %q, want 0", got)
	}
	must("put", "k", "v")
	if got := must("del", "k"); got != "1\n" {
		t.Errorf("del k: %q, want 1", got)
	}
	if _, errOut, code := kvctlAt(ep, "", "del", "--if-mod-revision", "5", "k"); code != 1 || !strings.Contains(errOut, "conflict") {
		t.Errorf("del --if-mod-revision 5 of a missing key: exit %d, %q; want 1, a conflict", code, errOut)
	}
}

// TestLeaseGrantBareSeconds: lease grant takes a bare integer as seconds,
// as etcdctl does, besides durations.
func TestLeaseGrantBareSeconds(t *testing.T) {
	ep := startNode(t)
	for ttl, want := range map[string]string{"10": "granted TTL 10s", "90s": "granted TTL 1m30s", "2m": "granted TTL 2m0s"} {
		id := strings.TrimSpace(mustKvctl(t, ep, "lease", "grant", ttl))
		if got := mustKvctl(t, ep, "lease", "ttl", id); !strings.Contains(got, want) {
			t.Errorf("lease grant %s, then lease ttl: %q, want %q", ttl, got, want)
		}
	}
	for _, ttl := range []string{"-10", "ten", "1.5"} {
		if _, errOut, code := kvctlAt(ep, "", "lease", "grant", ttl); code != 2 {
			t.Errorf("lease grant %s: exit %d, %q; want 2", ttl, code, errOut)
		}
	}
}

// TestTableEscapesUnprintable: -w table prints a key or value holding
// control bytes, invalid UTF-8 or a leading quote Go-quoted, so that
// nothing reaches the terminal raw and every row stays one line.
func TestTableEscapesUnprintable(t *testing.T) {
	ep := startNode(t)
	must := func(args ...string) string { t.Helper(); return mustKvctl(t, ep, args...) }
	for _, tc := range []struct{ key, value, want string }{
		{"bin", "a\x00b\x1b[31mred\n", `bin  "a\x00b\x1b[31mred\n"`},
		{"utf", "h\xc3\xa9llo w\xffrld", `utf  "héllo w\xffrld"`},
		{"tab\tkey", "plain text", `"tab\tkey"  plain text`},
		{"quoted", `"x"`, `quoted  "\"x\""`},
		{"text", "héllo world", `text  héllo world`},
	} {
		must("put", tc.key, tc.value)
		out := must("-w", "table", "get", tc.key)
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[1], tc.want+"  ") {
			t.Errorf("-w table get %q: %q, want a row starting %q", tc.key, out, tc.want)
		}
		if strings.ContainsAny(out, "\x00\x1b\t") {
			t.Errorf("-w table get %q printed control bytes raw: %q", tc.key, out)
		}
	}
	out := must("-w", "table", "mget", "bin", "text")
	if !strings.Contains(out, `"a\x00b\x1b[31mred\n"`) || strings.Count(out, "\n") != 3 {
		t.Errorf("-w table mget: %q", out)
	}
	out = must("-w", "table", "get", "--prefix", "tab", "--keys-only")
	if !strings.Contains(out, `"tab\tkey"`) {
		t.Errorf("-w table get --prefix --keys-only: %q", out)
	}
}
