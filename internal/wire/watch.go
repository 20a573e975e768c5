package wire

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/kvd-project/kvd/internal/limits"
)

// Watches (OpWatch, OpWatchCancel). A watch request's Key is the key, or
// with the WatchPrefix flag the prefix (empty: every key), and its Value a
// WatchRequest. The server answers on the request's id many times: first a
// message with the WatchCreated flag and no events, then batches of events
// in commit order, until the watch is cancelled, the connection closes, or
// a message with a non-OK status ends it (StatusCompacted: Version is the
// oldest version the node can still serve; others: Value is a message).
// Every OK message's Version says how far the stream is complete: every
// matching event with a version at most Version has been sent. A message
// may hold no event: it only tells that progress (a watch whose keys see
// no writes still learns how far it is, to resume from there).
//
//	watch request = from:u64
//	watch message = flags:u8 n:u32 n*(type:u8 keyLen:u16 version:u64 valueLen:u32 key value)
//	cancel        = Key empty, Value: the watch request's id (u64)
//
// A message holds at most MaxWatchEvents events and stops before the event
// that would take it past MaxWatchBytes of keys and values, but always
// holds at least one pending event (one full-size value fits a message).
// Events of one version (a transaction's writes) may span messages.

// Watch request flags (Request.Flags).
const (
	WatchPrefix uint16 = 1 << 0 // Key is a prefix
	watchFlags         = WatchPrefix
)

// Watch message flags.
const (
	WatchCreated uint8 = 1 << 0 // the first message of a watch: it is registered
	watchMsgFlag       = WatchCreated
)

// Bounds of one watch message.
const (
	MaxWatchEvents = limits.MaxWatchEvents
	MaxWatchBytes  = limits.MaxWatchBytes
)

// EventType is what a watch event did to its key.
type EventType uint8

// Event types.
const (
	EventPut    EventType = 1
	EventDelete EventType = 2
)

func (t EventType) String() string {
	switch t {
	case EventPut:
		return "PUT"
	case EventDelete:
		return "DELETE"
	}
	return fmt.Sprintf("event(%d)", uint8(t))
}

// ErrWatch: a watch request, cancel or message does not decode.
var ErrWatch = errors.New("wire: malformed watch")

// WatchEvent is one applied write. Version is the Raft index of its entry
// (a transaction's writes share one); Value is empty for a delete. Key and
// Value alias the frame they were decoded from.
type WatchEvent struct {
	Type    EventType
	Key     []byte
	Value   []byte
	Version uint64
}

// WatchEventLen is the encoded size of an event.
func WatchEventLen(keyLen, valueLen int) int { return 1 + 2 + 8 + 4 + keyLen + valueLen }

// WatchMessage is one message of a watch's stream.
type WatchMessage struct {
	Flags  uint8
	Events []WatchEvent
}

// AppendWatchRequest appends the request's value: the version to start from
// (0: after the node's applied index).
func AppendWatchRequest(b []byte, from uint64) []byte {
	return binary.LittleEndian.AppendUint64(b, from)
}

// DecodeWatchRequest parses a watch request's value.
func DecodeWatchRequest(b []byte) (from uint64, err error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("%w: request of %d bytes, want 8", ErrWatch, len(b))
	}
	return binary.LittleEndian.Uint64(b), nil
}

// CheckWatchFlags refuses unknown watch request flags.
func CheckWatchFlags(f uint16) error {
	if f&^watchFlags != 0 {
		return fmt.Errorf("%w: unknown flags %#x", ErrWatch, f)
	}
	return nil
}

// AppendWatchCancel appends a cancel's value: the watch's request id.
func AppendWatchCancel(b []byte, id uint64) []byte { return binary.LittleEndian.AppendUint64(b, id) }

// DecodeWatchCancel parses a cancel's value.
func DecodeWatchCancel(b []byte) (uint64, error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("%w: cancel of %d bytes, want 8", ErrWatch, len(b))
	}
	return binary.LittleEndian.Uint64(b), nil
}

// AppendWatchMessage appends m's encoding to b.
func AppendWatchMessage(b []byte, m *WatchMessage) []byte {
	b = append(b, m.Flags)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(m.Events)))
	for _, e := range m.Events {
		b = append(b, byte(e.Type))
		b = binary.LittleEndian.AppendUint16(b, uint16(len(e.Key)))
		b = binary.LittleEndian.AppendUint64(b, e.Version)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(e.Value)))
		b = append(b, e.Key...)
		b = append(b, e.Value...)
	}
	return b
}

// DecodeWatchMessage parses a watch message. Keys and values alias b. The
// event count is checked against the bytes present before anything is
// allocated for it; events must be in version order, deletes carry no
// value.
func DecodeWatchMessage(b []byte, out *WatchMessage) error {
	r := scanReader{b: b}
	var m WatchMessage
	m.Flags = r.u8("flags")
	n := r.u32("event count")
	if r.err == nil && uint64(n)*uint64(WatchEventLen(0, 0)) > uint64(len(r.b)) {
		r.fail(fmt.Sprintf("%d events in %d bytes", n, len(r.b)))
	}
	if r.err == nil && n > 0 {
		m.Events = make([]WatchEvent, n)
	}
	for i := range m.Events {
		e := &m.Events[i]
		e.Type = EventType(r.u8("event type"))
		kl := r.u16("key length")
		e.Version = r.u64("version")
		vl := r.u32("value length")
		e.Key = r.bytes(uint64(kl), "key")
		e.Value = r.bytes(uint64(vl), "value")
		if r.err != nil {
			break
		}
	}
	if err := r.done(); err != nil {
		return fmt.Errorf("%w: %w", ErrWatch, err)
	}
	if m.Flags&^watchMsgFlag != 0 {
		return fmt.Errorf("%w: unknown flags %#x", ErrWatch, m.Flags)
	}
	for i, e := range m.Events {
		switch {
		case e.Type != EventPut && e.Type != EventDelete:
			return fmt.Errorf("%w: event %d has unknown type %d", ErrWatch, i, e.Type)
		case e.Type == EventDelete && len(e.Value) != 0:
			return fmt.Errorf("%w: event %d deletes with a value", ErrWatch, i)
		case i > 0 && e.Version < m.Events[i-1].Version:
			return fmt.Errorf("%w: event %d out of version order", ErrWatch, i)
		}
	}
	*out = m
	return nil
}
