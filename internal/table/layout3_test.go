package table

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/kvd-project/kvd/internal/revision"
)

// Layout 3 records, as a server of the previous layout writes them: an
// 8-byte version where layout 4 has the Meta. This package writes only
// layout 4; these encoders let the tests check that readers still take
// layout 3's records, as Meta{Mod: version}.

// makeRecord3 encodes a live layout 3 record at off.
func makeRecord3(key, value []byte, version, off uint64) ([]byte, Slot) {
	f := format3
	n := f.recordLen(len(key), len(value))
	rec := make([]byte, n)
	le := binary.LittleEndian
	le.PutUint64(rec[recMeta:], version)
	le.PutUint16(rec[f.keyLenAt():], uint16(len(key)))
	le.PutUint32(rec[f.valueLenAt():], uint32(len(value)))
	copy(rec[f.keyAt()+copy(rec[f.keyAt():], key):], value)
	le.PutUint32(rec[recCRC:], crc32.Checksum(rec[recMeta:], castagnoli))
	return rec, Slot{Offset: off, Len: n, FP: Fingerprint(Hash(key))}
}

// makeInline3 encodes a layout 3 inline record (tag 1) in a fresh block.
func makeInline3(key, value []byte, version uint64, state uint32) ([]byte, InlineSlot) {
	var head [14]byte
	le := binary.LittleEndian
	le.PutUint64(head[:], version)
	le.PutUint16(head[8:], uint16(len(key)))
	le.PutUint32(head[10:], uint32(len(value)))
	payload := append(append(head[:], key...), value...)
	n := format3.inlineLen(len(key), len(value))
	block := make([]byte, n)
	const tag = 1
	for w := 1; w < len(block)/inlineWord; w++ {
		copy(block[w*inlineWord:w*inlineWord+inlineGroup], payload[min(len(payload), (w-1)*inlineGroup):])
		block[w*inlineWord+inlineTagByte] = tag
	}
	le.PutUint64(block, inlineWord0(payloadCRC(block), state, tag))
	return block, InlineSlot{Len: n, Tag: tag, Mod: uint32(version) & inlineModMask, FP: 7}
}

func TestLayout3RecordsReadAsMod(t *testing.T) {
	t.Parallel()
	h3 := Header{Version: LayoutVersion3}
	key, value := []byte("key3"), pattern(40, 5)
	const version = 1<<40 | 77
	want := revision.Meta{Mod: version}

	rec, s := makeRecord3(key, value, version, 4096)
	got, m, err := h3.VerifyRecord(rec, key, s)
	if err != nil || m != want || !bytes.Equal(got, value) {
		t.Fatalf("layout 3 record: %q %+v %v", got, m, err)
	}
	if _, _, err := VerifyRecord(rec, key, s); err == nil {
		t.Fatal("a layout 4 reader accepted a layout 3 record")
	}
	block, is := makeInline3(key, value, version, stateLive)
	got, m, err = h3.VerifyInline(block, key, is, nil)
	if err != nil || m != want || !bytes.Equal(got, value) {
		t.Fatalf("layout 3 inline record: %q %+v %v", got, m, err)
	}
	if _, _, err := VerifyInline(block, key, is, nil); err == nil {
		t.Fatal("a layout 4 reader accepted a layout 3 inline record")
	}
	// Torn detection is the same: a word of another tag.
	block[3*inlineWord+inlineTagByte] = 2
	if _, _, err := h3.VerifyInline(block, key, is, nil); err != ErrTorn {
		t.Fatalf("torn layout 3 inline record: %v, want ErrTorn", err)
	}
}
