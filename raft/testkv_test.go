package raft

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/kvd-project/kvd/internal/limits"
	"github.com/kvd-project/kvd/internal/revision"
	"github.com/kvd-project/kvd/internal/store"
)

// This package's tests replicate testKV, a key/value state machine of
// PUTs and DELETEs only (internal/kv is the real one; it imports this
// package, so these tests cannot use it). Its entries have internal/kv's
// command layout, op | uvarint proposer | uvarint request id |
// uvarint len(key) | key | value, so the logs and snapshots the tests
// make look like a real node's.
const (
	testOpPut    byte = 1
	testOpDelete byte = 2
)

// Write is one write testKV applied, as its testApplier sees it.
type Write struct {
	Version         uint64
	Key, Value      []byte
	Deleted, Atomic bool
}

// testApplier mirrors testKV's applied writes (applierLog).
type testApplier interface {
	Apply(ws []Write)
	Restore()
}

type testKV struct {
	app    testApplier // nil: none
	writes []Write
}

// withKV gives cfg a fresh testKV publishing to app (nil: none).
func withKV(cfg Config, app testApplier) Config {
	cfg.StateMachine = &testKV{app: app}
	return cfg
}

func (m *testKV) Open(Env) error { return nil }

func (m *testKV) Apply(u *store.Update, ents []*pb.Entry, out []Outcome) ([]Outcome, error) {
	for _, e := range ents {
		if e.GetType() != pb.EntryNormal || len(e.GetData()) == 0 {
			continue
		}
		op, proposer, reqID, key, value, err := decodeTestCommand(e.GetData())
		if err != nil {
			continue // as a real state machine does: skipped alike everywhere
		}
		var existed bool
		if op == testOpPut {
			err = u.Put(key, value, revision.Meta{Create: e.GetIndex(), Mod: e.GetIndex(), Version: 1})
		} else {
			existed, err = u.Delete(key, e.GetIndex())
		}
		if err != nil {
			return out, err
		}
		m.writes = append(m.writes, Write{Version: e.GetIndex(), Key: key, Value: value, Deleted: op == testOpDelete})
		out = append(out, Outcome{Proposer: proposer, ReqID: reqID, Index: e.GetIndex(), Value: existed})
	}
	return out, nil
}

func (m *testKV) Committed(_ uint64, installed bool) {
	if m.app != nil && len(m.writes) > 0 {
		m.app.Apply(m.writes)
	}
	clear(m.writes)
	m.writes = m.writes[:0]
	if m.app != nil && installed {
		m.app.Restore()
	}
}

func (m *testKV) Lead(bool)         {}
func (m *testKV) Tick(func(Encode)) {}
func testCommand(op byte, key, value []byte) Encode {
	return func(proposer, reqID uint64) []byte {
		b := []byte{op}
		b = binary.AppendUvarint(b, proposer)
		b = binary.AppendUvarint(b, reqID)
		b = binary.AppendUvarint(b, uint64(len(key)))
		b = append(b, key...)
		return append(b, value...)
	}
}

func decodeTestCommand(data []byte) (op byte, proposer, reqID uint64, key, value []byte, err error) {
	if len(data) < 1 || data[0] < testOpPut || data[0] > testOpDelete {
		return 0, 0, 0, nil, nil, errBadCommand
	}
	op, data = data[0], data[1:]
	var ok bool
	if proposer, data, ok = uvarint(data); !ok {
		return 0, 0, 0, nil, nil, errBadCommand
	}
	if reqID, data, ok = uvarint(data); !ok {
		return 0, 0, 0, nil, nil, errBadCommand
	}
	n, data, ok := uvarint(data)
	if !ok || n > uint64(len(data)) {
		return 0, 0, 0, nil, nil, errBadCommand
	}
	return op, proposer, reqID, data[:n:n], data[n:], nil
}

var errTestKey = errors.New("testKV: invalid key or value")

func checkTestKV(key, value []byte) error {
	if len(key) == 0 || len(key) > limits.MaxKey || len(value) > limits.MaxValue {
		return fmt.Errorf("%w: %d, %d bytes", errTestKey, len(key), len(value))
	}
	return nil
}

// Put replicates key=value through testKV; version is the entry's index.
func (n *Node) Put(ctx context.Context, key, value []byte) (version uint64, err error) {
	return n.putAdmitted(ctx, Admission{}, key, value)
}

func (n *Node) putAdmitted(ctx context.Context, adm Admission, key, value []byte) (uint64, error) {
	if err := checkTestKV(key, value); err != nil {
		return 0, err
	}
	r, err := n.Propose(ctx, adm, testCommand(testOpPut, key, value))
	return r.Index, err
}

// Delete replicates the removal of key through testKV.
func (n *Node) Delete(ctx context.Context, key []byte) (existed bool, version uint64, err error) {
	if err := checkTestKV(key, nil); err != nil {
		return false, 0, err
	}
	r, err := n.Propose(ctx, Admission{}, testCommand(testOpDelete, key, nil))
	existed, _ = r.Value.(bool)
	return existed, r.Index, err
}

// Get reads key's applied value.
func (n *Node) Get(key []byte) (value []byte, version uint64, ok bool, err error) {
	st, release, err := n.Acquire()
	if err != nil {
		return nil, 0, false, err
	}
	defer release()
	value, m, ok, err := st.Get(key)
	return value, m.Mod, ok, err
}

// ForEach walks the applied keys.
func (n *Node) ForEach(fn func(key, value []byte, version uint64) error) error {
	st, release, err := n.Acquire()
	if err != nil {
		return err
	}
	defer release()
	return st.ForEach(func(key, value []byte, m revision.Meta) error { return fn(key, value, m.Mod) })
}

// nopSM is the state machine of the tests' bare loops.
type nopSM struct{}

func (nopSM) Open(Env) error { return nil }
func (nopSM) Apply(_ *store.Update, _ []*pb.Entry, out []Outcome) ([]Outcome, error) {
	return out, nil
}
func (nopSM) Committed(uint64, bool) {}
func (nopSM) Lead(bool)              {}
func (nopSM) Tick(func(Encode))      {}
