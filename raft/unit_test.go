package raft

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	tr := newMemNet().endpoint("a")
	valid := Config{ID: 1, DataDir: "/tmp/x", Transport: tr, InitialCluster: map[uint64]string{1: "a", 2: "b"}}
	tests := []struct {
		name string
		mod  func(*Config)
		ok   bool
	}{
		{"defaults", func(*Config) {}, true},
		{"zero id", func(c *Config) { c.ID = 0 }, false},
		{"no data dir", func(c *Config) { c.DataDir = "" }, false},
		{"no transport", func(c *Config) { c.Transport = nil }, false},
		{"self not in peers", func(c *Config) { c.ID = 3 }, false},
		{"joining without addr", func(c *Config) { c.ID, c.Join = 3, true }, false},
		{"joining with addr", func(c *Config) { c.ID, c.Join, c.Addr = 3, true, "c" }, true},
		{"peer without addr", func(c *Config) { c.InitialCluster[2] = "" }, false},
		{"election not above heartbeat", func(c *Config) { c.ElectionTicks, c.HeartbeatTicks = 3, 3 }, false},
		{"drift too large", func(c *Config) { c.LeaseDrift = 0.6 }, false},
		{"drift negative", func(c *Config) { c.LeaseDrift = -0.1 }, false},
		{"drift NaN", func(c *Config) { c.LeaseDrift = math.NaN() }, false},
		{"lease too short", func(c *Config) { c.ElectionTicks, c.LeaseDrift = 2, 0.5 }, false},
		{"catch-up above snapshot count", func(c *Config) { c.SnapshotCount, c.SnapshotCatchUpEntries = 10, 11 }, false},
		{"small snapshot count takes a small catch-up default", func(c *Config) { c.SnapshotCount = 10 }, true},
		{"message size near transport limit", func(c *Config) { c.MaxSizePerMsg = 3 << 20 }, false},
		{"tick below 1ms", func(c *Config) { c.TickInterval = time.Microsecond }, false},
	}
	for _, tt := range tests {
		c := valid
		c.InitialCluster = map[uint64]string{1: "a", 2: "b"}
		tt.mod(&c)
		err := c.Validate()
		if (err == nil) != tt.ok || (err != nil && !errors.Is(err, ErrConfig)) {
			t.Errorf("%s: Validate() = %v, want ok=%v", tt.name, err, tt.ok)
		}
	}
}

func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	c := Config{ID: 1, InitialCluster: map[uint64]string{1: "a"}}.withDefaults()
	if c.TickInterval != 100*time.Millisecond || c.ElectionTicks != 10 || c.HeartbeatTicks != 1 ||
		c.SnapshotCount != 10000 || c.SnapshotCatchUpEntries != 5000 || c.Addr != "a" || c.Logger == nil {
		t.Fatalf("defaults: %+v", c)
	}
	// 1s election timeout, 10% drift, one tick of margin.
	if got := c.leaseDuration(); got != 800*time.Millisecond {
		t.Fatalf("lease duration %v, want 800ms", got)
	}
}

func TestCommandRoundTrip(t *testing.T) {
	tests := []command{
		{op: opPut, proposer: 1, reqID: 2, key: []byte("k"), value: []byte("v")},
		{op: opPut, proposer: 1 << 60, reqID: 1<<64 - 1, key: bytes.Repeat([]byte("k"), MaxKeyLen), value: []byte{}},
		{op: opDelete, proposer: 3, reqID: 0, key: []byte("gone"), value: []byte{}},
	}
	for _, c := range tests {
		enc := appendCommand(nil, c)
		if len(enc) > commandSize(c) {
			t.Errorf("encoded %d bytes, commandSize says %d", len(enc), commandSize(c))
		}
		got, err := decodeCommand(enc)
		if err != nil || got.op != c.op || got.proposer != c.proposer || got.reqID != c.reqID ||
			!bytes.Equal(got.key, c.key) || !bytes.Equal(got.value, c.value) {
			t.Errorf("round trip of %+v: %+v, %v", c, got, err)
		}
	}
	bad := [][]byte{nil, {9}, {opPut}, {opPut, 1, 2}, {opPut, 1, 2, 5, 'k'}}
	for _, b := range bad {
		if _, err := decodeCommand(b); !errors.Is(err, errBadCommand) {
			t.Errorf("decodeCommand(%v) err = %v", b, err)
		}
	}
}

func TestMemberContextRoundTrip(t *testing.T) {
	for _, m := range []memberContext{{}, {proposer: 7, reqID: 1 << 40, addr: "10.0.0.1:7000"}, {addr: "x"}} {
		got, err := decodeMemberContext(appendMemberContext(nil, m))
		if err != nil || got != m {
			t.Errorf("round trip of %+v: %+v, %v", m, got, err)
		}
	}
}

func TestPeerHello(t *testing.T) {
	h := hello{from: 3, cluster: 42, addr: "host:1"}
	b := appendHello(nil, h)
	if !IsPeerHello(b) {
		t.Fatal("own hello not recognised")
	}
	if got, err := parseHello(b); err != nil || got != h {
		t.Fatalf("parseHello = %+v, %v", got, err)
	}
	for _, notHello := range [][]byte{nil, []byte("KVDPEER1"), []byte("GET key please, this is a client"), b[:helloHeader-1]} {
		if IsPeerHello(notHello) {
			t.Errorf("IsPeerHello(%q) = true", notHello)
		}
	}
}

func TestSnapshotFrames(t *testing.T) {
	want := transferID{index: 77, term: 5, nonce: 1<<63 + 9}
	id, err := parseSnapshotBegin(appendSnapshotBegin(nil, want))
	if id != want || err != nil {
		t.Fatalf("begin frame: %v %v", id, err)
	}
	for _, bad := range [][]byte{{frameSnapshotBegin}, appendSnapshotBegin(nil, want)[:24], append(appendSnapshotBegin(nil, want), 0)} {
		if _, err := parseSnapshotBegin(bad); err == nil {
			t.Errorf("begin frame of %d bytes accepted", len(bad))
		}
	}
	m := &pb.Message{Type: pb.MsgSnap.Enum(), To: new(uint64(2)), Snapshot: &pb.Snapshot{Metadata: &pb.SnapshotMetadata{Index: new(uint64(77))}}}
	end, err := appendSnapshotEnd(nil, want, m)
	if err != nil || end[0] != frameSnapshotEnd {
		t.Fatalf("end frame: %q, %v", end, err)
	}
	id, body, err := parseSnapshotFrame(end)
	got := &pb.Message{}
	if err != nil || id != want || proto.Unmarshal(body, got) != nil || !proto.Equal(got, m) {
		t.Fatalf("end frame parsed as %v, %v, %v", id, got, err)
	}
	pairs := [][2]string{{"a", "12345678"}, {"key-two", "87654321value"}, {string(make([]byte, 300)), "xxxxxxxx"}}
	chunk := appendSnapshotFrameHeader(nil, frameSnapshotChunk, want)
	for _, p := range pairs {
		before := len(chunk)
		chunk = appendChunkRecord(chunk, []byte(p[0]), []byte(p[1]))
		if len(chunk)-before != chunkRecordSize([]byte(p[0]), []byte(p[1])) {
			t.Fatalf("chunkRecordSize disagrees with the encoding")
		}
	}
	id, body, err = parseSnapshotFrame(chunk)
	if err != nil || id != want {
		t.Fatalf("chunk frame id %v, %v", id, err)
	}
	var decoded [][2]string
	err = forEachChunkRecord(body, func(k, v []byte) error {
		decoded = append(decoded, [2]string{string(k), string(v)})
		return nil
	})
	if err != nil || fmt.Sprint(decoded) != fmt.Sprint(pairs) {
		t.Fatalf("decoded %v, %v", decoded, err)
	}
	if err := forEachChunkRecord(body[:len(body)-1], func(k, v []byte) error { return nil }); err == nil {
		t.Fatal("truncated chunk accepted")
	}
}

func TestNotLeaderError(t *testing.T) {
	var err error = fmt.Errorf("put: %w", &NotLeaderError{LeaderID: 2, LeaderAddr: "b:1"})
	var nl *NotLeaderError
	if !errors.Is(err, ErrNotLeader) || !errors.As(err, &nl) || nl.LeaderID != 2 || nl.LeaderAddr != "b:1" {
		t.Fatalf("errors.Is/As failed on %v", err)
	}
	if !errors.Is(err, &NotLeaderError{}) {
		t.Fatal("errors.Is with a *NotLeaderError target failed")
	}
	if errors.Is(ErrNotLeader, ErrStopped) || errors.Is(&NotLeaderError{}, ErrStopped) {
		t.Fatal("NotLeaderError matches an unrelated sentinel")
	}
}

// TestLeasePublishesExpiry checks that every change of the lease is
// published at once, in order, as an absolute expiry, and that a lease
// lapses by time with nobody acting.
func TestLeasePublishesExpiry(t *testing.T) {
	var events []leaseEvent
	l := newLease(func(term uint64, exp time.Time) { events = append(events, leaseEvent{time.Now(), term, exp}) }, 4)
	now := time.Now()
	l.now = func() time.Time { return now }
	want := func(term uint64, exp time.Time) {
		t.Helper()
		if len(events) != 1 || events[0].term != term || !events[0].expiry.Equal(exp) {
			t.Fatalf("events %+v, want one (%d, %v)", events, term, exp)
		}
		events = events[:0]
	}
	e1 := now.Add(30 * time.Millisecond)
	l.extend(5, e1)
	want(5, e1)
	l.extend(5, e1.Add(-time.Millisecond)) // an older grant changes nothing
	if len(events) != 0 || !l.valid() {
		t.Fatalf("older grant: events %+v valid %v", events, l.valid())
	}
	now = e1 // lapsed by time, with nobody poking the lease
	if l.valid() || len(events) != 0 {
		t.Fatal("lease valid at its expiry, or a lapse was published")
	}
	e2 := now.Add(time.Hour)
	l.extend(5, e2)
	want(5, e2)
	l.revoke()
	want(5, time.Time{})
	l.revoke() // nothing to end
	if len(events) != 0 {
		t.Fatalf("second revoke published %+v", events)
	}
	l.extend(5, e2)
	want(5, e2)
	l.setTerm(6) // a new term ends it
	want(6, time.Time{})
	if l.valid() {
		t.Fatal("lease valid in a new term")
	}
}

type applyCall struct {
	version    uint64
	key, value string
	deleted    bool
}

type recordingApplier struct {
	calls   []applyCall
	batches int
}

func (r *recordingApplier) Apply(ws []Write) {
	r.batches++
	for _, w := range ws {
		r.calls = append(r.calls, applyCall{w.Version, string(w.Key), string(w.Value), w.Deleted})
	}
}
func (r *recordingApplier) Restore() {}

// TestDeliverAppliesCollapsesRepeats checks that the Applier sees one call
// per key per batch (the key's final state), in log order.
func TestDeliverAppliesCollapsesRepeats(t *testing.T) {
	tests := []struct {
		name string
		ops  []Write
		want []applyCall
	}{
		{"single", []Write{{Version: 5, Key: []byte("a"), Value: []byte("1")}}, []applyCall{{5, "a", "1", false}}},
		{"distinct keys keep log order",
			[]Write{{Version: 5, Key: []byte("b"), Value: []byte("1")}, {Version: 6, Key: []byte("a"), Value: []byte("2")}},
			[]applyCall{{5, "b", "1", false}, {6, "a", "2", false}}},
		{"overwrite and delete collapse",
			[]Write{
				{Version: 5, Key: []byte("a"), Value: []byte("1")},
				{Version: 6, Key: []byte("b"), Value: []byte("x")},
				{Version: 7, Key: []byte("a"), Value: []byte("2")},
				{Version: 8, Key: []byte("b"), Deleted: true},
				{Version: 9, Key: []byte("c"), Value: []byte("3")},
				{Version: 10, Key: []byte("a"), Value: []byte("4")},
			},
			[]applyCall{{8, "b", "", true}, {9, "c", "3", false}, {10, "a", "4", false}}},
	}
	for _, tt := range tests {
		rec := &recordingApplier{}
		l := &loop{cfg: Config{Applier: rec}}
		l.scratch.applies = append(l.scratch.applies, tt.ops...)
		l.deliverApplies()
		if fmt.Sprint(rec.calls) != fmt.Sprint(tt.want) {
			t.Errorf("%s: calls %v, want %v", tt.name, rec.calls, tt.want)
		}
		if rec.batches != 1 {
			t.Errorf("%s: %d Apply calls, want one per batch", tt.name, rec.batches)
		}
		if len(l.scratch.applies) != 0 {
			t.Errorf("%s: scratch not reset", tt.name)
		}
	}
}
