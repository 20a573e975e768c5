package table

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"

	"github.com/kvd-project/kvd/internal/invariants"
)

// Paired assertions, on in test builds (internal/invariants). Each checks
// on the write side a rule that remote readers rely on when they verify
// what they read (docs/layout.md): a check failing here means a reader
// could have been served something the format promises it never sees.

// checkWritten: a record is complete and verifiable before its slot is
// published (readers verify checksum, key, length and value).
func (t *Table) checkWritten(off uint64, s Slot, key, value []byte, version uint64) {
	if !invariants.Enabled {
		return
	}
	v, ver, err := VerifyRecord(t.mem[off:off+s.Len], key, s)
	invariants.Check(err == nil && ver == version && bytes.Equal(v, value),
		"record at %d does not verify before publication: %v", off, err)
}

// checkRetiring: a record leaving publication is still intact and live:
// nothing wrote over it while readers could find it (records are
// immutable once published, except the state word).
func (t *Table) checkRetiring(s Slot) {
	if !invariants.Enabled {
		return
	}
	rec := t.mem[s.Offset : s.Offset+s.Len]
	le := binary.LittleEndian
	invariants.Check(le.Uint32(rec[recState:]) == stateLive, "retiring a record at %d that is not live", s.Offset)
	invariants.Check(crc32.Checksum(rec[recVersion:], castagnoli) == le.Uint32(rec[recCRC:]),
		"a published record at %d was modified before it was retired", s.Offset)
}

// checkHeader: the header in memory parses to what the writer believes.
func (t *Table) checkHeader() {
	if !invariants.Enabled {
		return
	}
	h, err := ParseHeader(t.mem)
	invariants.Check(err == nil && h == t.Header(), "header in memory %+v (%v) differs from the writer's %+v", h, err, t.Header())
}
