package wire

import (
	"encoding/binary"
	"fmt"

	"github.com/kvd-project/kvd/internal/limits"
)

// BatchResult is the outcome of one PUT of an OpPutBatch: Status as a
// lone PUT's response would have it, Revision the store revision it
// wrote at (StatusOK), Message the error's (other statuses).
type BatchResult struct {
	Status   Status
	Revision uint64
	Message  string
}

// maxBatchMessage bounds a result's message: a refusal's text is short,
// and a batch's reply stays small (MaxBatchResults of them).
const maxBatchMessage = 1024

// MaxBatchResults is the most results a reply holds: one per PUT.
const MaxBatchResults = limits.MaxBatchPuts

// MaxBatchResultsLen bounds the encoding of a reply's results.
const MaxBatchResultsLen = binary.MaxVarintLen64 + MaxBatchResults*(2+2*binary.MaxVarintLen64+maxBatchMessage)

// AppendBatchResults appends the encoding of rs:
//
//	count:uvarint { status:le16 revision:uvarint len:uvarint message }*
//
// Messages longer than maxBatchMessage are cut.
func AppendBatchResults(b []byte, rs []BatchResult) []byte {
	b = binary.AppendUvarint(b, uint64(len(rs)))
	for _, r := range rs {
		msg := r.Message
		if len(msg) > maxBatchMessage {
			msg = msg[:maxBatchMessage]
		}
		b = binary.LittleEndian.AppendUint16(b, uint16(r.Status))
		b = binary.AppendUvarint(b, r.Revision)
		b = binary.AppendUvarint(b, uint64(len(msg)))
		b = append(b, msg...)
	}
	return b
}

// DecodeBatchResults parses AppendBatchResults' encoding; a count over
// MaxBatchResults or a message over its bound is refused.
func DecodeBatchResults(b []byte) ([]BatchResult, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > MaxBatchResults {
		return nil, fmt.Errorf("%w: batch results: bad count", ErrLength)
	}
	b = b[k:]
	rs := make([]BatchResult, 0, n)
	for range n {
		if len(b) < 2 {
			return nil, fmt.Errorf("%w: batch results", ErrShort)
		}
		r := BatchResult{Status: Status(binary.LittleEndian.Uint16(b))}
		b = b[2:]
		if r.Revision, k = binary.Uvarint(b); k <= 0 {
			return nil, fmt.Errorf("%w: batch result revision", ErrShort)
		}
		b = b[k:]
		m, k := binary.Uvarint(b)
		if k <= 0 || m > maxBatchMessage || m > uint64(len(b)-k) {
			return nil, fmt.Errorf("%w: batch result message", ErrLength)
		}
		r.Message = string(b[k : k+int(m)])
		b = b[k+int(m):]
		rs = append(rs, r)
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the batch results", ErrLength, len(b))
	}
	return rs, nil
}
