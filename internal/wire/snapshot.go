package wire

import (
	"errors"
	"fmt"
)

// Snapshot streams (OpSnapshot). The server answers one request with
// responses of the same ID, in order, until one is final:
//
//	chunk = flags:u8 data
//
// data is the next piece of the backup file (internal/backup's format), at
// most MaxSnapshotChunk bytes; the chunk with SnapshotLast set is the last.
// A response with a status other than StatusOK also ends the stream: the
// backup is incomplete, and what arrived must be thrown away. A client that
// stops reading holds up only its own connection, and the server closes it
// once a chunk has waited for it for the server's reply timeout.

// MaxSnapshotChunk bounds a chunk's data.
const MaxSnapshotChunk = 1 << 20

// SnapshotLast marks the stream's last chunk.
const SnapshotLast uint8 = 1 << 0

// ErrSnapshotChunk: a chunk does not decode.
var ErrSnapshotChunk = errors.New("wire: malformed snapshot chunk")

// AppendSnapshotChunk appends a chunk to b.
func AppendSnapshotChunk(b []byte, last bool, data []byte) []byte {
	var f uint8
	if last {
		f = SnapshotLast
	}
	return append(append(b, f), data...)
}

// DecodeSnapshotChunk splits a chunk; data aliases b.
func DecodeSnapshotChunk(b []byte) (last bool, data []byte, err error) {
	switch {
	case len(b) == 0:
		return false, nil, fmt.Errorf("%w: empty", ErrSnapshotChunk)
	case b[0]&^SnapshotLast != 0:
		return false, nil, fmt.Errorf("%w: unknown flags %#x", ErrSnapshotChunk, b[0])
	case len(b)-1 > MaxSnapshotChunk:
		return false, nil, fmt.Errorf("%w: %d bytes of data (max %d)", ErrSnapshotChunk, len(b)-1, MaxSnapshotChunk)
	}
	return b[0] == SnapshotLast, b[1:], nil
}
