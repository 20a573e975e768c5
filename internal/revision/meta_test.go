package revision

import (
	"errors"
	"testing"
)

func TestEncodingRoundTrips(t *testing.T) {
	m := Meta{Create: 3, Mod: 1<<63 + 5, Version: 7, Lease: 0x0102030405060708}
	b := m.Append([]byte("x"))
	if len(b) != 1+Size {
		t.Fatalf("encoded %d bytes, want %d", len(b)-1, Size)
	}
	got, err := Decode(b[1:])
	if err != nil || got != m {
		t.Fatalf("Decode = %+v, %v; want %+v", got, err, m)
	}
	p := make([]byte, Size)
	m.Put(p)
	if string(p) != string(b[1:]) {
		t.Fatal("Put and Append disagree")
	}
	if _, err := Decode(b[2:]); !errors.Is(err, ErrShort) {
		t.Fatalf("short input: err = %v, want ErrShort", err)
	}
}

func TestNextCountsVersionsFromCreation(t *testing.T) {
	tests := []struct {
		name  string
		prev  Meta
		rev   uint64
		lease uint64
		want  Meta
	}{
		{"created", Meta{}, 10, 0, Meta{Create: 10, Mod: 10, Version: 1}},
		{"updated", Meta{Create: 10, Mod: 10, Version: 1, Lease: 4}, 12, 0, Meta{Create: 10, Mod: 12, Version: 2}},
		{"leased", Meta{Create: 10, Mod: 12, Version: 2}, 15, 9, Meta{Create: 10, Mod: 15, Version: 3, Lease: 9}},
	}
	for _, tt := range tests {
		if got := tt.prev.Next(tt.rev, tt.lease); got != tt.want {
			t.Errorf("%s: Next = %+v, want %+v", tt.name, got, tt.want)
		}
	}
}
