package wire

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/kvd-project/kvd/internal/limits"
)

// Atomic multi-key reads (OpGetMany). The request's Flags carry the
// consistency level, its Key is empty and its Value a list of keys; the
// response's Version is the applied index every answer was read at, its
// Value one answer per key, in the request's order.
//
//	get-many request  = n:u16 n*(keyLen:u16 key)
//	get-many response = n:u16 n*(found:u8 version:u64 valueLen:u32 value)
//
// The keys of one request are at most MaxGetManyKeys, and their values
// together at most MaxGetManyBytes: the answers travel in one message.

// Get-many bounds per request.
const (
	MaxGetManyKeys  = limits.MaxGetManyKeys
	MaxGetManyBytes = limits.MaxGetManyBytes
)

// getManyAnswerLen is an answer's size without its value.
const getManyAnswerLen = 1 + 8 + 4

// ErrGetMany: a get-many request or response does not decode.
var ErrGetMany = errors.New("wire: malformed get-many")

// AppendGetManyRequest appends the encoding of keys (at most
// MaxGetManyKeys, each shorter than 64 KiB).
func AppendGetManyRequest(b []byte, keys [][]byte) []byte {
	b = binary.LittleEndian.AppendUint16(b, uint16(len(keys)))
	for _, k := range keys {
		b = binary.LittleEndian.AppendUint16(b, uint16(len(k)))
		b = append(b, k...)
	}
	return b
}

// DecodeGetManyRequest appends the keys of b to keys; they alias b.
func DecodeGetManyRequest(b []byte, keys [][]byte) ([][]byte, error) {
	if len(b) < 2 {
		return keys, fmt.Errorf("%w: %d bytes", ErrGetMany, len(b))
	}
	n := int(binary.LittleEndian.Uint16(b))
	if n > MaxGetManyKeys {
		return keys, fmt.Errorf("%w: %d keys, at most %d", ErrGetMany, n, MaxGetManyKeys)
	}
	b = b[2:]
	for range n {
		if len(b) < 2 {
			return keys, fmt.Errorf("%w: truncated key length", ErrGetMany)
		}
		kl := int(binary.LittleEndian.Uint16(b))
		if len(b) < 2+kl {
			return keys, fmt.Errorf("%w: truncated key", ErrGetMany)
		}
		keys = append(keys, b[2:2+kl:2+kl])
		b = b[2+kl:]
	}
	if len(b) != 0 {
		return keys, fmt.Errorf("%w: %d bytes after the last key", ErrGetMany, len(b))
	}
	return keys, nil
}

// GetManyAnswer is one key's answer. Value aliases the frame.
type GetManyAnswer struct {
	Found   bool
	Version uint64
	Value   []byte
}

// GetManyAnswerLen is the encoded size of an answer with a value of n bytes.
func GetManyAnswerLen(n int) int { return getManyAnswerLen + n }

// AppendGetManyResponse appends the encoding of answers.
func AppendGetManyResponse(b []byte, answers []GetManyAnswer) []byte {
	b = binary.LittleEndian.AppendUint16(b, uint16(len(answers)))
	for _, a := range answers {
		found := byte(0)
		if a.Found {
			found = 1
		}
		b = append(b, found)
		b = binary.LittleEndian.AppendUint64(b, a.Version)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(a.Value)))
		b = append(b, a.Value...)
	}
	return b
}

// DecodeGetManyResponse appends the answers of b to answers; their values
// alias b. An answer that is not found carries no value.
func DecodeGetManyResponse(b []byte, answers []GetManyAnswer) ([]GetManyAnswer, error) {
	if len(b) < 2 {
		return answers, fmt.Errorf("%w: %d bytes", ErrGetMany, len(b))
	}
	n := int(binary.LittleEndian.Uint16(b))
	if n > MaxGetManyKeys {
		return answers, fmt.Errorf("%w: %d answers, at most %d", ErrGetMany, n, MaxGetManyKeys)
	}
	b = b[2:]
	for range n {
		if len(b) < getManyAnswerLen {
			return answers, fmt.Errorf("%w: truncated answer", ErrGetMany)
		}
		var a GetManyAnswer
		switch b[0] {
		case 0:
		case 1:
			a.Found = true
		default:
			return answers, fmt.Errorf("%w: found flag %d", ErrGetMany, b[0])
		}
		a.Version = binary.LittleEndian.Uint64(b[1:])
		vl := uint64(binary.LittleEndian.Uint32(b[9:]))
		b = b[getManyAnswerLen:]
		if vl > uint64(len(b)) || (!a.Found && vl != 0) {
			return answers, fmt.Errorf("%w: value of %d bytes", ErrGetMany, vl)
		}
		a.Value = b[:vl:vl]
		b = b[vl:]
		answers = append(answers, a)
	}
	if len(b) != 0 {
		return answers, fmt.Errorf("%w: %d bytes after the last answer", ErrGetMany, len(b))
	}
	return answers, nil
}
