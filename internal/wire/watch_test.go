package wire

import (
	"bytes"
	"errors"
	"testing"

	"github.com/kvd-project/kvd/internal/revision"
)

func TestWatchMessageRoundTrip(t *testing.T) {
	m := WatchMessage{Flags: WatchCreated, Events: []WatchEvent{
		{Type: EventPut, Key: []byte("a"), Value: []byte("1"), Version: 3},
		{Type: EventDelete, Key: []byte("b"), Version: 3},
		{Type: EventPut, Key: []byte("c"), Value: []byte{}, Version: 9},
	}}
	var got WatchMessage
	if err := DecodeWatchMessage(AppendWatchMessage(nil, &m), &got); err != nil {
		t.Fatal(err)
	}
	if got.Flags != m.Flags || len(got.Events) != 3 {
		t.Fatalf("got %+v", got)
	}
	for i, e := range got.Events {
		w := m.Events[i]
		if e.Type != w.Type || e.Version != w.Version || !bytes.Equal(e.Key, w.Key) || !bytes.Equal(e.Value, w.Value) {
			t.Fatalf("event %d: got %+v want %+v", i, e, w)
		}
	}
	from, err := DecodeWatchRequest(AppendWatchRequest(nil, 42))
	if err != nil || from != 42 {
		t.Fatalf("request: %d %v", from, err)
	}
	id, err := DecodeWatchCancel(AppendWatchCancel(nil, 7))
	if err != nil || id != 7 {
		t.Fatalf("cancel: %d %v", id, err)
	}
}

func TestWatchDecodeMalformed(t *testing.T) {
	good := AppendWatchMessage(nil, &WatchMessage{Events: []WatchEvent{
		{Type: EventPut, Key: []byte("k"), Value: []byte("v"), Version: 5},
		{Type: EventPut, Key: []byte("l"), Value: []byte("w"), Version: 6},
	}})
	bad := map[string][]byte{
		"empty":      nil,
		"short":      good[:len(good)-1],
		"trailing":   append(append([]byte(nil), good...), 0),
		"flags":      append([]byte{0x80}, good[1:]...),
		"huge count": {0, 0xff, 0xff, 0xff, 0xff},
	}
	typ := append([]byte(nil), good...)
	typ[5] = 9 // the first event's type
	bad["type"] = typ
	order := append([]byte(nil), good...)
	order[5+3] = 7 // the first event's version above the second's
	bad["order"] = order
	del := append([]byte(nil), good...)
	del[5] = byte(EventDelete) // a delete that carries a value
	bad["delete with value"] = del
	for name, b := range bad {
		var m WatchMessage
		if err := DecodeWatchMessage(b, &m); !errors.Is(err, ErrWatch) {
			t.Errorf("%s: err %v, want ErrWatch", name, err)
		}
	}
	if _, err := DecodeWatchRequest([]byte{1, 2}); !errors.Is(err, ErrWatch) {
		t.Errorf("short request: %v", err)
	}
	if err := CheckWatchFlags(1 << 7); !errors.Is(err, ErrWatch) {
		t.Errorf("unknown request flag: %v", err)
	}
}

func TestWatchMessagePrevKVRoundTrip(t *testing.T) {
	m := WatchMessage{Flags: WatchMsgPrevKV | WatchMsgFragment, Events: []WatchEvent{
		{Type: EventPut, Key: []byte("a"), Value: []byte("2"), Version: 4,
			HasPrev: true, PrevValue: []byte("1"), PrevMeta: revision.Meta{Create: 3, Mod: 3, Version: 1, Lease: 9}},
		{Type: EventPut, Key: []byte("b"), Value: []byte("new"), Version: 4},
		{Type: EventDelete, Key: []byte("a"), Version: 5, HasPrev: true, PrevValue: []byte{},
			PrevMeta: revision.Meta{Create: 3, Mod: 4, Version: 2}},
	}}
	var got WatchMessage
	if err := DecodeWatchMessage(AppendWatchMessage(nil, &m), &got); err != nil {
		t.Fatal(err)
	}
	if got.Flags != m.Flags || len(got.Events) != len(m.Events) {
		t.Fatalf("got %+v", got)
	}
	for i, e := range got.Events {
		w := m.Events[i]
		if e.HasPrev != w.HasPrev || e.PrevMeta != w.PrevMeta || !bytes.Equal(e.PrevValue, w.PrevValue) ||
			!bytes.Equal(e.Value, w.Value) {
			t.Fatalf("event %d: got %+v want %+v", i, e, w)
		}
	}
}

func TestWatchDecodeRefusesMalformedPrevAndProgress(t *testing.T) {
	good := AppendWatchMessage(nil, &WatchMessage{Flags: WatchMsgPrevKV, Events: []WatchEvent{
		{Type: EventPut, Key: []byte("k"), Value: []byte("v"), Version: 5, HasPrev: true, PrevValue: []byte("u")},
	}})
	bad := map[string][]byte{
		"prev cut":               good[:len(good)-1],
		"prev flag 2":            append(append([]byte(nil), good[:5+15+2]...), 2),
		"prev without the flag":  append([]byte{0}, good[1:]...),
		"progress with an event": append([]byte{WatchMsgProgress | WatchMsgPrevKV}, good[1:]...),
	}
	for name, b := range bad {
		var m WatchMessage
		if err := DecodeWatchMessage(b, &m); !errors.Is(err, ErrWatch) {
			t.Errorf("%s: err %v, want ErrWatch", name, err)
		}
	}
}

// FuzzWatchMessage: the decoder never panics nor reads past its input, and
// what it accepts re-encodes to the same bytes.
func FuzzWatchMessage(f *testing.F) {
	f.Add(AppendWatchMessage(nil, &WatchMessage{Flags: WatchCreated}))
	f.Add(AppendWatchMessage(nil, &WatchMessage{Events: []WatchEvent{
		{Type: EventPut, Key: []byte("k"), Value: []byte("v"), Version: 1},
		{Type: EventDelete, Key: []byte("k"), Version: 2},
	}}))
	f.Add([]byte{0, 1, 0, 0, 0})
	f.Add(AppendWatchMessage(nil, &WatchMessage{Flags: WatchMsgPrevKV | WatchMsgFragment, Events: []WatchEvent{
		{Type: EventPut, Key: []byte("k"), Value: []byte("v"), Version: 1, HasPrev: true, PrevValue: []byte("u"),
			PrevMeta: revision.Meta{Create: 1, Mod: 1, Version: 1}},
		{Type: EventDelete, Key: []byte("j"), Version: 2},
	}}))
	f.Add(AppendWatchMessage(nil, &WatchMessage{Flags: WatchMsgProgress}))
	f.Fuzz(func(t *testing.T, b []byte) {
		var m WatchMessage
		if err := DecodeWatchMessage(b, &m); err != nil {
			return
		}
		if again := AppendWatchMessage(nil, &m); !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs:\n%x\n%x", again, b)
		}
	})
}

// FuzzWatchRequest: a request's value and a cancel decode or fail cleanly.
func FuzzWatchRequest(f *testing.F) {
	f.Add(AppendWatchRequest(nil, 0))
	f.Add(AppendWatchRequest(nil, 1<<63))
	f.Add([]byte{1})
	f.Fuzz(func(t *testing.T, b []byte) {
		from, err := DecodeWatchRequest(b)
		if err == nil && !bytes.Equal(AppendWatchRequest(nil, from), b) {
			t.Fatalf("re-encoding differs")
		}
		id, err := DecodeWatchCancel(b)
		if err == nil && !bytes.Equal(AppendWatchCancel(nil, id), b) {
			t.Fatalf("re-encoding differs")
		}
	})
}

func TestWatchMessageMetaRoundTrip(t *testing.T) {
	m := WatchMessage{Flags: WatchMsgMeta | WatchMsgPrevKV, Events: []WatchEvent{
		{Type: EventPut, Key: []byte("a"), Value: []byte("1"), Version: 4,
			Meta: revision.Meta{Create: 4, Mod: 4, Version: 1, Lease: 0x1234}, HasPrev: false, PrevValue: nil},
		{Type: EventPut, Key: []byte("b"), Value: []byte("2"), Version: 4,
			Meta:    revision.Meta{Create: 2, Mod: 4, Version: 3},
			HasPrev: true, PrevValue: []byte("1"), PrevMeta: revision.Meta{Create: 2, Mod: 3, Version: 2, Lease: 7}},
		{Type: EventDelete, Key: []byte("a"), Version: 6, Meta: revision.Meta{Mod: 6}},
	}}
	var got WatchMessage
	if err := DecodeWatchMessage(AppendWatchMessage(nil, &m), &got); err != nil {
		t.Fatal(err)
	}
	for i, e := range got.Events {
		w := m.Events[i]
		if e.Meta != w.Meta || e.Version != w.Version || !bytes.Equal(e.Value, w.Value) || e.HasPrev != w.HasPrev || e.PrevMeta != w.PrevMeta {
			t.Fatalf("event %d: got %+v want %+v", i, e, w)
		}
	}
	if err := CheckWatchFlags(WatchMeta | WatchPrevKV | WatchPrefix); err != nil {
		t.Fatalf("WatchMeta refused: %v", err)
	}
}

func TestWatchDecodeRefusesMetaThatDoesNotFit(t *testing.T) {
	put := func(m revision.Meta) WatchEvent {
		return WatchEvent{Type: EventPut, Key: []byte("k"), Value: []byte("v"), Version: 5, Meta: m}
	}
	for _, tc := range []struct {
		name string
		e    WatchEvent
	}{
		{"mod is not the revision", put(revision.Meta{Create: 5, Mod: 4, Version: 1})},
		{"no create revision", put(revision.Meta{Mod: 5, Version: 1})},
		{"created after the write", put(revision.Meta{Create: 6, Mod: 5, Version: 1})},
		{"version 0", put(revision.Meta{Create: 5, Mod: 5})},
		{"delete with a lease", WatchEvent{Type: EventDelete, Key: []byte("k"), Version: 5, Meta: revision.Meta{Mod: 5, Lease: 3}}},
		{"delete with a version", WatchEvent{Type: EventDelete, Key: []byte("k"), Version: 5, Meta: revision.Meta{Create: 2, Mod: 5, Version: 2}}},
	} {
		b := AppendWatchMessage(nil, &WatchMessage{Flags: WatchMsgMeta, Events: []WatchEvent{tc.e}})
		var m WatchMessage
		if err := DecodeWatchMessage(b, &m); !errors.Is(err, ErrWatch) {
			t.Errorf("%s: err %v, want ErrWatch", tc.name, err)
		}
		if err := DecodeWatchMessage(b[:len(b)-1], &m); !errors.Is(err, ErrWatch) {
			t.Errorf("%s, truncated: err %v, want ErrWatch", tc.name, err)
		}
	}
}
