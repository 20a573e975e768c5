package wire

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

func TestGetManyRoundTrip(t *testing.T) {
	keys := [][]byte{[]byte("a"), {}, bytes.Repeat([]byte("k"), 1024)}
	got, err := DecodeGetManyRequest(AppendGetManyRequest(nil, keys), nil)
	if err != nil || !reflect.DeepEqual(got, keys) {
		t.Fatalf("request round trip = %q, %v", got, err)
	}
	answers := []GetManyAnswer{{Found: true, Version: 7, Value: []byte("v")}, {Value: []byte{}}, {Found: true, Version: 1 << 40, Value: []byte{}}}
	back, err := DecodeGetManyResponse(AppendGetManyResponse(nil, answers), nil)
	if err != nil || !reflect.DeepEqual(back, answers) {
		t.Fatalf("response round trip = %+v, %v", back, err)
	}
}

func TestGetManyDecodeMalformed(t *testing.T) {
	req := AppendGetManyRequest(nil, [][]byte{[]byte("ab")})
	resp := AppendGetManyResponse(nil, []GetManyAnswer{{Found: true, Version: 1, Value: []byte("v")}})
	tooMany := []byte{0xff, 0xff}
	for _, tc := range []struct {
		name string
		in   []byte
		resp bool
	}{
		{"request empty", nil, false},
		{"request truncated key", req[:len(req)-1], false},
		{"request trailing bytes", append(append([]byte(nil), req...), 0), false},
		{"request too many keys", tooMany, false},
		{"response empty", nil, true},
		{"response truncated value", resp[:len(resp)-1], true},
		{"response trailing bytes", append(append([]byte(nil), resp...), 0), true},
		{"response bad found flag", func() []byte { b := append([]byte(nil), resp...); b[2] = 2; return b }(), true},
		{"response value of a missing key", AppendGetManyResponse(nil, []GetManyAnswer{{Value: []byte("x")}}), true},
		{"response too many answers", tooMany, true},
	} {
		var err error
		if tc.resp {
			_, err = DecodeGetManyResponse(tc.in, nil)
		} else {
			_, err = DecodeGetManyRequest(tc.in, nil)
		}
		if !errors.Is(err, ErrGetMany) {
			t.Errorf("%s: err = %v, want ErrGetMany", tc.name, err)
		}
	}
}

func FuzzDecodeGetManyRequest(f *testing.F) {
	f.Add(AppendGetManyRequest(nil, [][]byte{[]byte("a"), []byte("bc")}))
	f.Add([]byte{0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		keys, err := DecodeGetManyRequest(in, nil)
		if err != nil {
			if !errors.Is(err, ErrGetMany) {
				t.Fatalf("error %v does not wrap ErrGetMany", err)
			}
			return
		}
		if out := AppendGetManyRequest(nil, keys); !bytes.Equal(out, in) {
			t.Fatalf("re-encode differs:\n%x\n%x", out, in)
		}
	})
}

func FuzzDecodeGetManyResponse(f *testing.F) {
	f.Add(AppendGetManyResponse(nil, []GetManyAnswer{{Found: true, Version: 3, Value: []byte("v")}, {}}))
	f.Add([]byte{0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		answers, err := DecodeGetManyResponse(in, nil)
		if err != nil {
			if !errors.Is(err, ErrGetMany) {
				t.Fatalf("error %v does not wrap ErrGetMany", err)
			}
			return
		}
		if out := AppendGetManyResponse(nil, answers); !bytes.Equal(out, in) {
			t.Fatalf("re-encode differs:\n%x\n%x", out, in)
		}
	})
}
