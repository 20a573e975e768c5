package peer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/kvd-project/kvd/internal/kvdtest/peertest"
	"github.com/kvd-project/kvd/internal/revision"
	"github.com/kvd-project/kvd/internal/store"
	"github.com/kvd-project/kvd/transport"
)

// historyStore is a store at index 3, term 2, store revision 2, whose key
// k was v at revision 1 and w at revision 2, with a checkpoint of that.
func historyStore(t *testing.T) *store.Store {
	t.Helper()
	st := openStore(t)
	u := st.NewUpdate()
	ents := []*pb.Entry{{Index: new(uint64(1)), Term: new(uint64(2))}, {Index: new(uint64(2)), Term: new(uint64(2))},
		{Index: new(uint64(3)), Term: new(uint64(2))}}
	err := errors.Join(u.Append(ents), u.SetApplied(3),
		u.RecordHistory([]byte("k"), []byte("v"), revision.Meta{Create: 1, Mod: 1, Version: 1}, false),
		u.RecordHistory([]byte("k"), []byte("w"), revision.Meta{Create: 1, Mod: 2, Version: 2}, false),
		u.SetRevision(2), u.Commit(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateSnapshot(0); err != nil {
		t.Fatal(err)
	}
	return st
}

// relayConn hands every frame sent on it to a receiving node's Reader.
// Both test nodes are node 1 (testSet), so the MsgSnap is readdressed as
// if from node 2.
type relayConn struct {
	recConn
	mu sync.Mutex
	r  *Reader
}

func (c *relayConn) Send(ctx context.Context, msg []byte) error {
	if IsHello(msg) || msg[0] == FrameMessage {
		return nil
	}
	if msg[0] == FrameSnapshotEnd {
		id, body, err := parseSnapshotFrame(msg)
		m := &pb.Message{}
		if err := errors.Join(err, proto.Unmarshal(body, m)); err != nil {
			return err
		}
		m.From, m.To = new(uint64(2)), new(uint64(1))
		if msg, err = AppendSnapshotEnd(nil, id, m); err != nil {
			return err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.r.Handle(msg)
}

// TestPeerTransferCarriesRevisionSpace: a snapshot transfer sends the
// revision space ('H' frames) and the receiver's store, once it installs
// it, answers reads at past revisions as the sender's does; an 'H' record
// without the shape of one ends the session.
func TestPeerTransferCarriesRevisionSpace(t *testing.T) {
	src := historyStore(t)
	h := newFakeHost()
	dst := openStore(t)
	r := testSet(t, Config{Store: dst}, h).NewReader(2)
	conn := &relayConn{recConn: recConn{max: transport.DefaultMaxMessage}, r: r}
	s := testSet(t, Config{Transport: dialer{conn: conn}, SnapshotChunkSize: 64}, newFakeHost())
	cp := src.Checkpoint()
	m := peertest.Snap(cp.Index(), cp.Term())
	m.From, m.To = new(uint64(1)), new(uint64(2))
	if !s.SendSnapshot(m, cp, 1) {
		t.Fatal("snapshot refused")
	}
	var in delivery
	select {
	case in = <-h.recv:
	case <-time.After(waitTimeout):
		t.Fatal("transfer never delivered")
	}
	u := dst.NewUpdate()
	if err := errors.Join(u.InstallSnapshot(in.msg.GetSnapshot(), in.staged), u.Commit(true)); err != nil {
		t.Fatal(err)
	}
	var got string
	_, err := dst.RangeAt(nil, nil, 1, func(k, v []byte, m revision.Meta) bool {
		got = fmt.Sprintf("%s=%s@%d", k, v, m.Mod)
		return true
	})
	if err != nil || got != "k=v@1" || dst.Revision() != 2 {
		t.Fatalf("after the transfer: revision %d, k at 1 = %q, %v", dst.Revision(), got, err)
	}

	id := TransferID{Index: 9, Term: 2, Nonce: 6}
	conn.mu.Lock()
	defer conn.mu.Unlock()
	handleAll(t, r, beginFrame(id))
	bad := AppendChunkRecord(AppendSnapshotHeader(nil, FrameSnapshotRevision, id), []byte("s"), []byte{1, 2})
	if err := r.Handle(bad); !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("malformed revision record: %v, want the session ended with ErrCorrupt", err)
	}
	r.Close()
}
