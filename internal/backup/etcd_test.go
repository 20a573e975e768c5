package backup

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"testing"
)

// etcdFrame is b in etcd's snapshot framing: padded to a multiple of 512
// bytes and followed by the SHA-256 of everything before.
func etcdFrame(b []byte) []byte {
	out := append(bytes.Clone(b), make([]byte, EtcdPadding(int64(len(b))))...)
	sum := sha256.Sum256(out)
	return append(out, sum[:]...)
}

// TestEtcdEnvelopeAccepted: a backup saved through etcd's API (etcdctl
// snapshot save) reads as the backup itself, and only a well-formed
// envelope does.
func TestEtcdEnvelopeAccepted(t *testing.T) {
	b := encode(t, 100, sample()[:5])
	framed := etcdFrame(b)
	if len(framed)%512 != sha256.Size {
		t.Fatalf("framed size %d: etcdctl wants 32 more than a multiple of 512", len(framed))
	}
	wantH, wantSum, err := Verify(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	damaged := func(i int) []byte { d := bytes.Clone(framed); d[i] ^= 1; return d }
	for _, tc := range []struct {
		name string
		file []byte
		want error // nil: accepted
	}{
		{"bare backup", b, nil},
		{"etcd envelope", framed, nil},
		{"envelope checksum damaged", damaged(len(framed) - 1), ErrChecksum},
		{"padding not zero", damaged(len(b)), ErrFormat},
		{"padding short", append(append(bytes.Clone(b), make([]byte, EtcdPadding(int64(len(b)))-1)...), framed[len(framed)-32:]...), ErrFormat},
		{"checksum alone, no padding", append(bytes.Clone(b), framed[len(framed)-32:]...), ErrFormat},
		{"a byte after the envelope", append(bytes.Clone(framed), 0), ErrFormat},
		{"envelope twice", append(bytes.Clone(framed), framed[len(b):]...), ErrFormat},
	} {
		h, sum, err := Verify(bytes.NewReader(tc.file))
		switch {
		case tc.want == nil && err != nil:
			t.Errorf("%s: Verify = %v, want it accepted", tc.name, err)
		case tc.want == nil && (h != wantH || !bytes.Equal(sum, wantSum)):
			t.Errorf("%s: header %+v sum %x, want the backup's %+v %x", tc.name, h, sum, wantH, wantSum)
		case tc.want != nil && !errors.Is(err, tc.want):
			t.Errorf("%s: Verify = %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestEtcdPadding(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want int
	}{{0, 0}, {1, 511}, {511, 1}, {512, 0}, {513, 511}, {1000, 24}} {
		if got := EtcdPadding(tc.n); got != tc.want {
			t.Errorf("EtcdPadding(%d) = %d, want %d", tc.n, got, tc.want)
		}
	}
}
