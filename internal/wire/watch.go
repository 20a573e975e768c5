package wire

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/kvd-project/kvd/internal/limits"
	"github.com/kvd-project/kvd/internal/revision"
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
//	watch message = flags:u8 n:u32 n*event
//	event         = type:u8 keyLen:u16 version:u64 valueLen:u32 key value [meta:32] [prev]
//	meta          = the key's metadata after the write             (only with WatchMsgMeta)
//	prev          = has:u8 [meta:32 prevLen:u32 prevValue]   (only with WatchMsgPrevKV)
//	cancel        = Key empty, Value: the watch request's id (u64)
//	progress req  = OpWatch, Flags WatchProgressRequest, Key empty, Value: the watch's id (u64)
//
// A message holds at most MaxWatchEvents events and stops before the event
// that would take it past MaxWatchBytes of keys and values, but always
// holds at least one pending event (one full-size value fits a message).
// With WatchFragment a message ends at a revision's end, unless one
// revision alone is past those bounds: then its pieces but the last carry
// WatchMsgFragment and the client joins them. Without it (a client that
// predates fragments) the events of one revision may span messages
// unflagged.
//
// Every flag below but WatchPrefix is newer than the first watches: a
// server that predates one refuses a request carrying it as malformed
// (unknown flags), and a server sends a message flag only to a watch that
// asked for what it means, so an older client never sees one.

// Watch request flags (Request.Flags).
const (
	WatchPrefix uint16 = 1 << 0 // Key is a prefix
	// WatchPrevKV: each event carries the key's value and metadata just
	// before its revision (etcd's prev_kv); messages carry WatchMsgPrevKV.
	WatchPrevKV uint16 = 1 << 1
	// WatchProgressNotify: the server sends a progress notification
	// (WatchMsgProgress) every progress-notify interval while the watch is
	// synced (etcd's progress_notify).
	WatchProgressNotify uint16 = 1 << 2
	// WatchFragment: the client joins a revision split across messages
	// (WatchMsgFragment), so the server keeps revisions whole otherwise.
	WatchFragment uint16 = 1 << 3
	// WatchProgressRequest: not a new watch but a request for a progress
	// notification on the open watch whose id is the Value (etcd's
	// RequestProgress), sent once the watch is synced.
	WatchProgressRequest uint16 = 1 << 4
	// WatchMeta: each event carries its key's metadata after the write
	// (create revision, version, lease: etcd's event kv); messages carry
	// WatchMsgMeta.
	WatchMeta  uint16 = 1 << 5
	watchFlags        = WatchPrefix | WatchPrevKV | WatchProgressNotify | WatchFragment | WatchProgressRequest | WatchMeta
)

// Watch message flags.
const (
	WatchCreated uint8 = 1 << 0 // the first message of a watch: it is registered
	// WatchMsgPrevKV: every event of the message carries its prev field.
	WatchMsgPrevKV uint8 = 1 << 1
	// WatchMsgFragment: the last revision of the message continues in the
	// next message.
	WatchMsgFragment uint8 = 1 << 2
	// WatchMsgProgress: a progress notification: no events; the message's
	// Version is the revision through which the stream is complete.
	WatchMsgProgress uint8 = 1 << 3
	// WatchMsgMeta: every event of the message carries its meta field.
	WatchMsgMeta uint8 = 1 << 4
	watchMsgFlag       = WatchCreated | WatchMsgPrevKV | WatchMsgFragment | WatchMsgProgress | WatchMsgMeta
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

// WatchEvent is one applied write. Version is its store revision (a
// transaction's writes share one); Value is empty for a delete. Meta is
// the key's metadata after the write (Meta.Mod is Version); a delete's is
// only its revision, as etcd's delete events carry. With prev_kv, HasPrev says whether the key existed just before, and
// PrevValue and PrevMeta are what it held then. Key, Value and PrevValue
// alias the frame they were decoded from.
type WatchEvent struct {
	Type      EventType
	Key       []byte
	Value     []byte
	Version   uint64
	Meta      revision.Meta
	PrevValue []byte
	PrevMeta  revision.Meta
	HasPrev   bool
}

// WatchEventLen is the encoded size of an event without its prev field.
func WatchEventLen(keyLen, valueLen int) int { return 1 + 2 + 8 + 4 + keyLen + valueLen }

// WatchMessage is one message of a watch's stream.
type WatchMessage struct {
	Flags  uint8
	Events []WatchEvent
}

// metaFits reports whether e's metadata is what a write at its revision
// can leave: a put's modified the key at it, after creating it; a
// delete's is the revision alone.
func metaFits(e *WatchEvent) bool {
	m := e.Meta
	if e.Type == EventDelete {
		return m == revision.Meta{Mod: e.Version}
	}
	return m.Mod == e.Version && m.Create != 0 && m.Create <= m.Mod && m.Version != 0
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
		if m.Flags&WatchMsgMeta != 0 {
			b = e.Meta.Append(b)
		}
		if m.Flags&WatchMsgPrevKV != 0 {
			b = appendPrev(b, &e)
		}
	}
	return b
}

func appendPrev(b []byte, e *WatchEvent) []byte {
	if !e.HasPrev {
		return append(b, 0)
	}
	b = e.PrevMeta.Append(append(b, 1))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(e.PrevValue)))
	return append(b, e.PrevValue...)
}

// decodePrev reads an event's prev field.
func decodePrev(r *scanReader, e *WatchEvent) {
	switch r.u8("prev flag") {
	case 0:
		return
	case 1:
	default:
		r.fail("prev flag not 0 or 1")
		return
	}
	m, ok := readMeta(r, "prev metadata")
	if !ok {
		return
	}
	e.PrevMeta, e.HasPrev = m, true
	e.PrevValue = r.bytes(uint64(r.u32("prev value length")), "prev value")
}

// decodeMeta reads an event's meta field.
func decodeMeta(r *scanReader, e *WatchEvent) {
	if m, ok := readMeta(r, "event metadata"); ok {
		e.Meta = m
	}
}

// readMeta reads one encoded revision.Meta; what names it in errors.
func readMeta(r *scanReader, what string) (revision.Meta, bool) {
	raw := r.bytes(revision.Size, what)
	if r.err != nil {
		return revision.Meta{}, false
	}
	m, err := revision.Decode(raw)
	if err != nil {
		r.fail(err.Error())
		return revision.Meta{}, false
	}
	return m, true
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
		if m.Flags&WatchMsgMeta != 0 {
			decodeMeta(&r, e)
		}
		if m.Flags&WatchMsgPrevKV != 0 {
			decodePrev(&r, e)
		}
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
		case m.Flags&WatchMsgMeta != 0 && !metaFits(&e):
			return fmt.Errorf("%w: event %d's metadata %+v does not fit its revision %d", ErrWatch, i, e.Meta, e.Version)
		}
	}
	if m.Flags&WatchMsgProgress != 0 && len(m.Events) > 0 {
		return fmt.Errorf("%w: a progress notification with events", ErrWatch)
	}
	*out = m
	return nil
}
