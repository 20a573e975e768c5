package txn

import (
	"errors"
	"maps"
	"testing"
)

// TestPutLeaseRoundTrip: a PUT with a lease encodes as its own op type and
// decodes back with its lease; a PUT without one encodes as before.
func TestPutLeaseRoundTrip(t *testing.T) {
	in := Txn{
		Compares: []Compare{ver("k", Equal, 0)},
		Then:     []Op{{Type: Put, Key: b("k"), Value: b("v"), Lease: 0xfeed}, {Type: Put, Key: b("j"), Value: b("w")}},
	}
	enc := Append(nil, &in)
	if len(enc) != EncodedLen(&in) {
		t.Fatalf("EncodedLen %d, encoding %d bytes", EncodedLen(&in), len(enc))
	}
	out, err := Decode(enc)
	if err != nil {
		t.Fatal(err)
	}
	if got := out.Then[0]; got.Type != Put || got.Lease != 0xfeed || string(got.Value) != "v" {
		t.Fatalf("decoded %+v", got)
	}
	if got := out.Then[1]; got.Lease != 0 || string(got.Value) != "w" {
		t.Fatalf("decoded %+v", got)
	}
	plain := Append(nil, &Txn{Then: []Op{{Type: Put, Key: b("j"), Value: b("w")}}})
	if plain[6] != byte(Put) {
		t.Fatalf("a PUT without a lease encodes as type %d, want %d (old entries must decode as before)", plain[6], Put)
	}
}

// TestPutLeaseMalformed: a lease PUT too short for its lease, or naming
// lease 0, is malformed; a lease on a DELETE is invalid.
func TestPutLeaseMalformed(t *testing.T) {
	short := []byte{0, 0, 1, 0, 0, 0, putLease, 1, 0, 3, 0, 0, 0, 'k', 1, 2, 3}
	if _, err := Parse(short); !errors.Is(err, ErrMalformed) {
		t.Fatalf("short lease operand: %v", err)
	}
	zero := []byte{0, 0, 1, 0, 0, 0, putLease, 1, 0, 8, 0, 0, 0, 'k', 0, 0, 0, 0, 0, 0, 0, 0}
	if _, err := Parse(zero); !errors.Is(err, ErrMalformed) {
		t.Fatalf("lease 0: %v", err)
	}
	bad := Txn{Then: []Op{{Type: Delete, Key: b("k"), Lease: 1}}}
	if err := bad.Validate(); !errors.Is(err, ErrInvalid) {
		t.Fatalf("delete with a lease: %v", err)
	}
}

// TestApplyLeaseChecked: a branch with a PUT naming a missing or full
// lease applies nothing, not even its other writes.
func TestApplyLeaseChecked(t *testing.T) {
	for _, tc := range []struct {
		name   string
		leases map[uint64]int
		want   error
	}{
		{"missing", map[uint64]int{}, ErrLeaseNotFound},
		{"full", map[uint64]int{7: 2}, ErrLeaseFull},
		{"ok", map[uint64]int{7: 1}, nil},
	} {
		s := base()
		s.leases, s.maxKeys = tc.leases, 3
		before := maps.Clone(s.m)
		t1 := Txn{Then: []Op{{Type: Delete, Key: b("a")}, {Type: Put, Key: b("c"), Value: b("v"), Lease: 7}, {Type: Put, Key: b("d"), Value: b("v"), Lease: 7}}}
		_, err := Apply(s, &t1, 9, true)
		if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
			t.Fatalf("%s: err %v, want %v", tc.name, err, tc.want)
		}
		if tc.want != nil && !maps.Equal(s.m, before) {
			t.Fatalf("%s: refused branch wrote: %v", tc.name, s.m)
		}
		if tc.want == nil && s.leaseOf["c"] != 7 {
			t.Fatalf("%s: c not attached: %v", tc.name, s.leaseOf)
		}
	}
}
