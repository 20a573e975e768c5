package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestGetOneKeyRangeAtMaxKey: `kvctl get KEY --keys-only|--count|--limit N`
// scans the one-key range [KEY, KEY+"\x00"). For a key of the longest
// length (1024 bytes, which put and get accept) that end bound is 1025
// bytes and the scan is refused as "key too large".
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
// "next", "the key to continue from (--from NEXT)". Values that are not
// UTF-8 go to value_base64, but keys (and next) are JSON strings, so a
// binary key comes back as U+FFFD: the keys printed are not the keys
// stored, and continuing from "next" repeats a key of the page before.
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
