package wire

import (
	"bytes"
	"errors"
	"slices"
	"testing"
	"time"
)

func TestLeaseRoundTrip(t *testing.T) {
	g := LeaseGrant{TTL: 10 * time.Second, ID: 42}
	var g2 LeaseGrant
	if err := DecodeLeaseGrant(AppendLeaseGrant(nil, &g), &g2); err != nil || g2 != g {
		t.Fatalf("grant: %+v, %v", g2, err)
	}
	i := LeaseInfo{ID: 42, TTL: 10 * time.Second, Remaining: 3 * time.Second, Keys: 7}
	var i2 LeaseInfo
	if err := DecodeLeaseInfo(AppendLeaseInfo(nil, &i), &i2); err != nil || i2 != i {
		t.Fatalf("info: %+v, %v", i2, err)
	}
	if id, err := DecodeLeaseID(AppendLeaseID(nil, 42)); err != nil || id != 42 {
		t.Fatalf("id: %d, %v", id, err)
	}
	if _, err := DecodeLeaseID(AppendLeaseID(nil, 0)); !errors.Is(err, ErrLength) {
		t.Fatalf("id 0: %v", err)
	}
	if _, err := DecodeLeaseID([]byte{1, 2, 3}); !errors.Is(err, ErrLength) {
		t.Fatalf("short id: %v", err)
	}
	if err := DecodeLeaseGrant(bytes.Repeat([]byte{0xff}, 16), &g2); !errors.Is(err, ErrLength) {
		t.Fatalf("negative TTL: %v", err)
	}
}

// TestLeaseRenewalDecodes: a keep-alive answer's revision decodes to what
// was encoded, an empty one (a server that predates it) to 0, and any
// other length is refused.
func TestLeaseRenewalDecodes(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		want uint64
		err  error
	}{
		{"revision", AppendLeaseRenewal(nil, 1<<40+3), 1<<40 + 3, nil},
		{"empty from an older server", nil, 0, nil},
		{"short", []byte{1, 2, 3}, 0, ErrLength},
		{"long", make([]byte, 9), 0, ErrLength},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeLeaseRenewal(tc.in)
			if got != tc.want || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
				t.Fatalf("got %d, %v; want %d, %v", got, err, tc.want, tc.err)
			}
		})
	}
}

// TestLeaseListRoundTrip: a lease list page decodes to what was encoded,
// and what no server sends (ids out of order, a zero id, a ragged length,
// more than a page) is refused.
func TestLeaseListRoundTrip(t *testing.T) {
	for _, l := range []LeaseList{{IDs: []uint64{}}, {IDs: []uint64{1, 7, 1<<63 - 1}, More: true}} {
		var got LeaseList
		if err := DecodeLeaseList(AppendLeaseList(nil, &l), &got); err != nil || got.More != l.More || !slices.Equal(got.IDs, l.IDs) {
			t.Fatalf("%+v decoded as %+v, %v", l, got, err)
		}
	}
	full := LeaseList{IDs: make([]uint64, MaxLeaseListIDs+1)}
	for i := range full.IDs {
		full.IDs[i] = uint64(i + 1)
	}
	var got LeaseList
	for name, b := range map[string][]byte{
		"empty":       nil,
		"more 2":      {2},
		"ragged":      {0, 1, 2, 3},
		"zero id":     AppendLeaseList(nil, &LeaseList{IDs: []uint64{0}}),
		"descending":  AppendLeaseList(nil, &LeaseList{IDs: []uint64{5, 3}}),
		"duplicate":   AppendLeaseList(nil, &LeaseList{IDs: []uint64{5, 5}}),
		"over a page": AppendLeaseList(nil, &full),
	} {
		if err := DecodeLeaseList(b, &got); !errors.Is(err, ErrLength) {
			t.Errorf("%s: %v, want ErrLength", name, err)
		}
	}
}

// FuzzLeaseDecoders: no lease decoder panics, and what decodes re-encodes
// to the same bytes.
func FuzzLeaseDecoders(f *testing.F) {
	f.Add(AppendLeaseGrant(nil, &LeaseGrant{TTL: time.Second, ID: 1}))
	f.Add(AppendLeaseInfo(nil, &LeaseInfo{ID: 1, TTL: time.Second, Remaining: 1, Keys: 2}))
	f.Add(AppendLeaseID(nil, 9))
	f.Add(AppendLeaseList(nil, &LeaseList{IDs: []uint64{3, 9}, More: true}))
	f.Fuzz(func(t *testing.T, b []byte) {
		var g LeaseGrant
		if DecodeLeaseGrant(b, &g) == nil && !bytes.Equal(AppendLeaseGrant(nil, &g), b) {
			t.Fatal("grant re-encodes differently")
		}
		var i LeaseInfo
		if DecodeLeaseInfo(b, &i) == nil && !bytes.Equal(AppendLeaseInfo(nil, &i), b) {
			t.Fatal("info re-encodes differently")
		}
		if id, err := DecodeLeaseID(b); err == nil && !bytes.Equal(AppendLeaseID(nil, id), b) {
			t.Fatal("id re-encodes differently")
		}
		var l LeaseList
		if DecodeLeaseList(b, &l) == nil && !bytes.Equal(AppendLeaseList(nil, &l), b) {
			t.Fatal("lease list re-encodes differently")
		}
	})
}
