package rangeq

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

var requests = []Request{
	{},
	{Flags: KeysOnly, Limit: 7, Start: []byte("a"), End: []byte("b")},
	{Flags: CountOnly, Start: []byte{0xff, 0}},
	{Flags: Meta | Total, Rev: 9},
	{Target: ByKey, Order: Descend},
	{Flags: Total, Target: ByValue, Order: Ascend, MinMod: 1, MaxMod: 2, MinCreate: 3, MaxCreate: 4, Offset: 5, Rev: 6},
	{MinCreate: 3},
}

func TestRequestRoundTrips(t *testing.T) {
	for _, q := range requests {
		var got Request
		if err := Decode(Append(nil, &q), &got); err != nil {
			t.Fatalf("%+v: %v", q, err)
		}
		if len(got.Start) == 0 {
			got.Start = q.Start
		}
		if len(got.End) == 0 {
			got.End = q.End
		}
		if !reflect.DeepEqual(got, q) {
			t.Errorf("got %+v want %+v", got, q)
		}
	}
}

// TestRequestWithoutExtensionIsTheOldScanRequest: a request that asks for
// nothing new encodes as a scan request always has (flags limit start end
// [rev]), so that a server that predates the extension serves it.
func TestRequestWithoutExtensionIsTheOldScanRequest(t *testing.T) {
	q := Request{Flags: KeysOnly, Limit: 3, Start: []byte("a"), End: []byte("z"), Rev: 7}
	want := []byte{1, 3, 0, 0, 0, 1, 0, 'a', 1, 0, 'z', 7, 0, 0, 0, 0, 0, 0, 0}
	if got := Append(nil, &q); !bytes.Equal(got, want) {
		t.Fatalf("got %v want %v", got, want)
	}
	q.Rev = 0
	if got := Append(nil, &q); !bytes.Equal(got, want[:11]) {
		t.Fatalf("got %v want %v", got, want[:11])
	}
}

func TestDecodeRefusesMalformed(t *testing.T) {
	plain := Append(nil, &Request{Limit: 1, Start: []byte("a"), End: []byte("z")})
	ext := Append(nil, &Request{Target: ByMod})
	mut := func(b []byte, f func(b []byte)) []byte { c := append([]byte(nil), b...); f(c); return c }
	for name, b := range map[string][]byte{
		"empty":               nil,
		"truncated":           plain[:len(plain)-1],
		"one trailing byte":   append(append([]byte(nil), plain...), 0),
		"unknown flag":        mut(plain, func(b []byte) { b[0] = 0x80 }),
		"keys and count":      mut(plain, func(b []byte) { b[0] = KeysOnly | CountOnly }),
		"start past the end":  mut(plain, func(b []byte) { b[5] = 0xff }),
		"revision 0 alone":    append(append([]byte(nil), plain...), 0, 0, 0, 0, 0, 0, 0, 0),
		"extension short":     ext[:len(ext)-1],
		"extension empty":     mut(ext, func(b []byte) { b[17] = 0 }),
		"unknown target":      mut(ext, func(b []byte) { b[17] = 9 }),
		"unknown order":       mut(ext, func(b []byte) { b[18] = 9 }),
		"offset in key order": mut(Append(nil, &Request{Target: ByMod, Offset: 1}), func(b []byte) { b[17] = 0 }),
	} {
		var q Request
		if err := Decode(b, &q); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// FuzzDecode: a decoded request re-encodes to the same bytes (one encoding
// per request), and nothing panics.
func FuzzDecode(f *testing.F) {
	for _, q := range requests {
		f.Add(Append(nil, &q))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var q Request
		if Decode(b, &q) != nil {
			return
		}
		if again := Append(nil, &q); !bytes.Equal(again, b) {
			t.Fatalf("%x decodes to %+v, which encodes to %x", b, q, again)
		}
	})
}

// olderDecoderAccepts is what a kvd that predates the extension and the
// total flag takes as a scan request: flags within keys only, count only
// and meta, and after the range nothing or an 8-byte revision.
func olderDecoderAccepts(b []byte) bool {
	r := reader{b: b}
	flags := r.u8()
	r.u32()
	r.bytes(int(r.u16()))
	r.bytes(int(r.u16()))
	return !r.short && flags&^(KeysOnly|CountOnly|Meta) == 0 && (len(r.b) == 0 || len(r.b) == 8)
}

// TestOlderServerRefusesWhatItCannotServe: a request with a sort, a
// filter or the total flag is refused by an older server instead of
// being served without them; one without is served as before.
func TestOlderServerRefusesWhatItCannotServe(t *testing.T) {
	for _, q := range []Request{
		{Order: Descend}, {Target: ByVersion}, {MinMod: 1}, {MaxMod: 1}, {MinCreate: 1}, {MaxCreate: 1},
		{Flags: Total}, {Target: ByMod, Rev: 5}, {Order: Descend, Start: []byte("k")},
	} {
		if olderDecoderAccepts(Append(nil, &q)) {
			t.Errorf("%+v: an older server would serve it", q)
		}
	}
	for _, q := range []Request{{}, {Rev: 5}, {Flags: KeysOnly | Meta, Limit: 3, Start: []byte("a")}} {
		if !olderDecoderAccepts(Append(nil, &q)) {
			t.Errorf("%+v: an older server would refuse it", q)
		}
	}
}
