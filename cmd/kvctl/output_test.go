package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
)

// TestWatchJSONBinary: -w json watch prints a key or value that is not
// UTF-8 in base64, as get does; as a JSON string its bytes were replaced
// by U+FFFD and could not be recovered.
func TestWatchJSONBinary(t *testing.T) {
	for _, ev := range []client.Event{
		{Type: client.EventPut, Key: []byte("k"), Value: []byte{0xff, 0x00, 0xfe}, ModRevision: 7},
		{Type: client.EventPut, Key: []byte("k\xff"), Value: []byte("v"), ModRevision: 8},
		{Type: client.EventDelete, Key: []byte("plain"), ModRevision: 9},
	} {
		var out bytes.Buffer
		e := &env{o: &options{write: "json"}, out: &out}
		if err := e.printEvent(ev); err != nil {
			t.Fatal(err)
		}
		var got struct {
			Type        string
			Key         string
			KeyBase64   []byte `json:"key_base64"`
			Value       string
			ValueBase64 []byte `json:"value_base64"`
			ModRevision uint64 `json:"mod_revision"`
		}
		if err := json.Unmarshal(out.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		key, value := got.Key, got.Value
		if got.KeyBase64 != nil {
			key = string(got.KeyBase64)
		}
		if got.ValueBase64 != nil {
			value = string(got.ValueBase64)
		}
		if got.Type != ev.Type.String() || key != string(ev.Key) || value != string(ev.Value) || got.ModRevision != ev.ModRevision {
			t.Errorf("event %+v printed as %s", ev, strings.TrimSpace(out.String()))
		}
	}
}

// TestFlagsOfOtherCommandsRefused: --value-file on anything but put, and
// an endpoint that is not host:port, are usage errors (exit 2), before
// anything is dialled.
func TestFlagsOfOtherCommandsRefused(t *testing.T) {
	for _, tc := range []struct {
		ep   string
		args []string
		want string
	}{
		{"127.0.0.1:1", []string{"get", "k", "--value-file", "/nonexistent"}, "--value-file applies to put only"},
		{"127.0.0.1", []string{"get", "k"}, "--endpoints"},
		{"127.0.0.1:1,host:0", []string{"get", "k"}, "--endpoints"},
	} {
		_, errOut, code := kvctlAt(tc.ep, "", append([]string{"--timeout", "1s"}, tc.args...)...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("kvctl --endpoints %s %v: exit %d, stderr %q; want exit 2 naming %q", tc.ep, tc.args, code, strings.TrimSpace(errOut), tc.want)
		}
	}
}

// TestMemberJSON: member add and remove honour -w json like every other
// command.
func TestMemberJSON(t *testing.T) {
	ep := startNode(t)
	addr := kvdtest.FreeAddrs(t, 1)[0]
	var added struct {
		ID        string // IDs are JSON strings (ids.go)
		Addr      string
		IsLearner bool `json:"is_learner"`
	}
	if err := json.Unmarshal([]byte(mustKvctl(t, ep, "-w", "json", "member", "add", "9", addr)), &added); err != nil {
		t.Fatal(err)
	}
	if added.ID != "9" || added.Addr != addr || !added.IsLearner {
		t.Fatalf("member add printed %+v", added)
	}
	var removed struct {
		ID      string
		Removed bool
	}
	if err := json.Unmarshal([]byte(mustKvctl(t, ep, "-w", "json", "member", "remove", "9")), &removed); err != nil {
		t.Fatal(err)
	}
	if removed.ID != "9" || !removed.Removed {
		t.Fatalf("member remove printed %+v", removed)
	}
}

// TestTxnJSONBinaryKey: -w json txn prints a key that is not UTF-8 in
// base64, as get and watch do.
func TestTxnJSONBinaryKey(t *testing.T) {
	ep := startNode(t)
	in := "\nput \"k\\xff\" v\nget \"k\\xff\"\n\n"
	out, errOut, code := kvctlAt(ep, in, "-w", "json", "txn")
	var r struct {
		Results []struct {
			Op        string
			Key       string
			KeyBase64 []byte `json:"key_base64"`
			Value     string
		}
	}
	if code != 0 || json.Unmarshal([]byte(out), &r) != nil || len(r.Results) != 2 {
		t.Fatalf("txn: exit %d, %q, %q", code, out, errOut)
	}
	for _, x := range r.Results {
		if x.Key != "" || string(x.KeyBase64) != "k\xff" {
			t.Errorf("%s result: key %q, key_base64 %q; want the key's bytes in key_base64", x.Op, x.Key, x.KeyBase64)
		}
	}
	if r.Results[1].Value != "v" {
		t.Errorf("get result: value %q", r.Results[1].Value)
	}
}
