package wire

import (
	"bytes"
	"testing"
)

func FuzzDecodeSnapshotChunk(f *testing.F) {
	f.Add(AppendSnapshotChunk(nil, true, []byte("data")))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		last, data, err := DecodeSnapshotChunk(b)
		if err != nil {
			return
		}
		if again := AppendSnapshotChunk(nil, last, data); !bytes.Equal(again, b) {
			t.Fatalf("chunk %x re-encodes as %x", b, again)
		}
	})
}
