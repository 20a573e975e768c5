package etcdapi

import (
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

func TestRangeOfMapsEtcdRangesToKvdWatches(t *testing.T) {
	for _, tc := range []struct {
		name     string
		key, end string
		ok       bool
		watchKey string
		prefix   bool
		in, out  []string
	}{
		{"key", "k", "", true, "k", false, []string{"k"}, []string{"k0", "j", ""}},
		{"empty key is \\x00", "", "", true, "\x00", false, []string{"\x00"}, []string{"a"}},
		{"from key", "b", "\x00", true, "", true, []string{"b", "b0", "zz"}, []string{"a", "az"}},
		{"every key", "\x00", "\x00", true, "", true, []string{"\x00", "a"}, nil},
		{"prefix", "ab", "ac", true, "a", true, []string{"ab", "ab\xff"}, []string{"ac", "a", "aa"}},
		{"range", "abc", "abf", true, "ab", true, []string{"abc", "abd", "abe\xff"}, []string{"abf", "abb", "ab"}},
		{"across prefixes", "ax", "c", true, "", true, []string{"ax", "b", "bzz"}, []string{"aw", "c", "c0"}},
		{"empty range", "b", "a", false, "", false, nil, nil},
		{"end equals key", "b", "b", false, "", false, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, ok := rangeOf(&pb.WatchCreateRequest{Key: []byte(tc.key), RangeEnd: []byte(tc.end)})
			if ok != tc.ok {
				t.Fatalf("ok %v, want %v", ok, tc.ok)
			}
			if !ok {
				return
			}
			if string(r.watchKey) != tc.watchKey || r.prefix != tc.prefix {
				t.Errorf("kvd watch %q prefix %v, want %q %v", r.watchKey, r.prefix, tc.watchKey, tc.prefix)
			}
			for _, k := range tc.in {
				if !r.contains([]byte(k)) {
					t.Errorf("%q left out", k)
				}
			}
			for _, k := range tc.out {
				if r.contains([]byte(k)) {
					t.Errorf("%q let in", k)
				}
			}
		})
	}
}
