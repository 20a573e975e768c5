package kv

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/limits"
	"github.com/kvd-project/kvd/internal/txn"
	"github.com/kvd-project/kvd/raft"
)

// noteAtomic records an Apply call's atomicity, and whether it was
// announced (BatchAhead) before its batch was committed, for the tests
// below. Every call with writes must be: a reader of the durable state
// ahead of the cache could otherwise see a write that depends on another
// key's earlier write in the same batch, which the cache does not show yet.
func (a *applierLog) noteAtomic(ws []Write) {
	if len(ws) > 0 && !a.announced {
		a.unannounced++
	}
	a.announced = false
	if len(ws) > 0 && ws[0].Atomic {
		a.atomicCalls++
	}
}

// BatchAhead is applierLog's Publisher.BatchAhead.
func (a *applierLog) BatchAhead() {
	a.mu.Lock()
	a.announced = true
	a.mu.Unlock()
}

func (a *applierLog) atomicStats() (calls, unannounced int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.atomicCalls, a.unannounced
}

func vcmp(key string, c txn.Cmp, v uint64) txn.Compare {
	return txn.Compare{Key: []byte(key), Target: txn.TargetMod, Cmp: c, Num: v}
}

func tput(key, value string) txn.Op {
	return txn.Op{Type: txn.Put, Key: []byte(key), Value: []byte(value)}
}

// txnAtLeader runs t at the leader, retrying proposals that provably did
// not enter the log (none of these tests loses its leader).
func (c *cluster) txnAtLeader(t *txn.Txn) (txn.Response, uint64, error) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return c.leader().node.Txn(ctx, t, raft.Admission{})
}

// TestTxnAppliedOnEveryNode: a transaction's compares are evaluated at
// apply on every node, its branch lands everywhere in one entry, and its
// writes reach the Applier in one Apply call marked Atomic (announced
// before the batch commits) when it wrote more than one key.
func TestTxnAppliedOnEveryNode(t *testing.T) {
	c := newCluster(t, 3, testConfig())
	va := c.put("a", "1")

	// A successful CAS: one key, not atomic.
	resp, v1, err := c.txnAtLeader(&txn.Txn{Compares: []txn.Compare{vcmp("a", txn.Equal, va)}, Then: []txn.Op{tput("a", "2")}})
	if err != nil || !resp.Succeeded || v1 <= va || resp.Results[0].Meta.Mod != v1 {
		t.Fatalf("CAS at the current version: %+v, version %d, %v", resp, v1, err)
	}
	// A stale CAS: not applied, and it says what it met.
	resp, _, err = c.txnAtLeader(&txn.Txn{Compares: []txn.Compare{vcmp("a", txn.Equal, va)}, Then: []txn.Op{tput("a", "3")}})
	if err != nil || resp.Succeeded || resp.Compared[0].Mod != v1 {
		t.Fatalf("stale CAS: %+v, %v; want failed at version %d", resp, err, v1)
	}
	// A multi-key transaction: then branch writes two keys, reads one.
	resp, v2, err := c.txnAtLeader(&txn.Txn{
		Compares: []txn.Compare{vcmp("a", txn.Equal, v1), vcmp("b", txn.Equal, 0)},
		Then:     []txn.Op{tput("a", "x"), tput("b", "y"), {Type: txn.Get, Key: []byte("a")}},
	})
	if err != nil || !resp.Succeeded || len(resp.Results) != 3 || string(resp.Results[2].Value) != "x" || resp.Results[2].Meta.Mod != v2 {
		t.Fatalf("two-key transaction: %+v, %v", resp, err)
	}
	// The else branch: a delete.
	resp, v3, err := c.txnAtLeader(&txn.Txn{
		Compares: []txn.Compare{{Key: []byte("b"), Target: txn.TargetValue, Cmp: txn.Equal, Value: []byte("nope")}},
		Then:     []txn.Op{tput("c", "then")},
		Else:     []txn.Op{{Type: txn.Delete, Key: []byte("a")}},
	})
	if err != nil || resp.Succeeded || !resp.Results[0].Found {
		t.Fatalf("else branch: %+v, %v", resp, err)
	}
	want := map[string]versioned{"b": {"y", v2}}
	for _, tn := range c.running() {
		c.caughtUp(tn)
		if got := kvState(t, tn.node); len(got) != 1 || got["b"] != want["b"] {
			t.Errorf("node %d: state %v, want %v (after entry %d)", tn.id, got, want, v3)
		}
		checkMirror(t, tn)
		calls, unannounced := tn.app.atomicStats()
		if calls != 1 || unannounced != 0 {
			t.Errorf("node %d: %d atomic Apply calls, want exactly 1; %d Apply calls not announced before their commit, want 0", tn.id, calls, unannounced)
		}
	}
}

// TestTxnReadBoundAppliesNothing: a branch whose GETs would return more
// than txn.MaxReadBytes fails on every node alike, its writes unmade.
func TestTxnReadBoundAppliesNothing(t *testing.T) {
	c := newCluster(t, 1, testConfig())
	c.put("big", string(make([]byte, limits.MaxValue)))
	c.put("small", "s")
	_, _, err := c.txnAtLeader(&txn.Txn{Then: []txn.Op{tput("w", "v"), {Type: txn.Get, Key: []byte("big")}, {Type: txn.Get, Key: []byte("small")}}})
	if !errors.Is(err, txn.ErrReadTooLarge) {
		t.Fatalf("err %v, want txn.ErrReadTooLarge", err)
	}
	if _, _, ok, _ := c.leader().node.Get([]byte("w")); ok {
		t.Fatal("the refused branch's PUT was applied")
	}
	// An invalid transaction is refused before it is proposed.
	if _, _, err := c.txnAtLeader(&txn.Txn{Then: []txn.Op{tput("k", "1"), tput("k", "2")}}); !errors.Is(err, txn.ErrInvalid) {
		t.Fatalf("duplicate writes: %v, want txn.ErrInvalid", err)
	}
}

// TestCommandsOfEarlierVersions: entries written before transactions
// existed decode as they always did, and a txn command round-trips.
func TestCommandsOfEarlierVersions(t *testing.T) {
	for _, tc := range []struct {
		b    []byte
		want command
	}{
		{[]byte{opPut, 7, 9, 1, 'k', 'v', 'v'}, command{op: opPut, proposer: 7, reqID: 9, key: []byte("k"), value: []byte("vv")}},
		{[]byte{opDelete, 1, 0x80, 0x01, 2, 'a', 'b'}, command{op: opDelete, proposer: 1, reqID: 128, key: []byte("ab"), value: []byte{}}},
	} {
		got, err := decodeCommand(tc.b)
		if err != nil || got.op != tc.want.op || got.proposer != tc.want.proposer || got.reqID != tc.want.reqID ||
			!bytes.Equal(got.key, tc.want.key) || !bytes.Equal(got.value, tc.want.value) {
			t.Errorf("decodeCommand(%v) = %+v, %v; want %+v", tc.b, got, err, tc.want)
		}
	}
	tx := txn.Txn{Compares: []txn.Compare{vcmp("k", txn.Equal, 3)}, Then: []txn.Op{tput("k", "v")}}
	c := command{op: opTxn, proposer: 2, reqID: 5, value: txn.Append(nil, &tx)}
	enc := appendCommand(nil, c)
	if len(enc) > maxCommandSize {
		t.Fatalf("txn command of %d bytes exceeds maxCommandSize", len(enc))
	}
	got, err := decodeCommand(enc)
	if err != nil || got.op != opTxn || len(got.key) != 0 {
		t.Fatalf("txn command decodes as %+v, %v", got, err)
	}
	if parsed, err := txn.Decode(got.value); err != nil || !bytes.Equal(txn.Append(nil, &parsed), c.value) {
		t.Fatalf("txn body: %+v, %v", parsed, err)
	}
}

// FuzzCommand feeds arbitrary entry data to the apply path's decoders:
// none may panic, whatever decodes re-encodes the same, and a txn body
// that parses can be evaluated.
func FuzzCommand(f *testing.F) {
	tx := txn.Txn{Compares: []txn.Compare{vcmp("k", txn.Equal, 3)}, Then: []txn.Op{tput("k", "v")}}
	f.Add(appendCommand(nil, command{op: opTxn, proposer: 1, reqID: 2, value: txn.Append(nil, &tx)}))
	f.Add(appendCommand(nil, command{op: opPut, proposer: 1, reqID: 2, key: []byte("k"), value: []byte("v")}))
	f.Add([]byte{opTxn, 1, 1, 0, 0, 0})
	f.Add(appendCommand(nil, command{op: opLeaseGrant, proposer: 1, reqID: 2, value: grantValue(7, time.Second)}))
	f.Add(appendCommand(nil, command{op: opLeaseRevoke, proposer: 1, reqID: 2, value: revokeValue(7, revokeExpired)}))
	lput := txn.Txn{Then: []txn.Op{{Type: txn.Put, Key: []byte("k"), Value: []byte("v"), Lease: 7}}}
	f.Add(appendCommand(nil, command{op: opTxn, proposer: 1, reqID: 2, value: txn.Append(nil, &lput)}))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := decodeCommand(b)
		if err != nil {
			if !errors.Is(err, errBadCommand) {
				t.Fatalf("error %v does not wrap errBadCommand", err)
			}
			return
		}
		switch c.op {
		case opLeaseGrant:
			if id, ttl, err := parseGrant(c.value); err == nil && !bytes.Equal(grantValue(id, ttl), c.value) {
				t.Fatal("grant re-encodes differently")
			}
		case opLeaseRevoke:
			if id, why, err := parseRevoke(c.value); err == nil && !bytes.Equal(revokeValue(id, why), c.value) {
				t.Fatal("revoke re-encodes differently")
			}
		}
		if c.op == opTxn {
			if tx, err := txn.Parse(c.value); err == nil {
				if !bytes.Equal(txn.Append(nil, &tx), c.value) {
					t.Fatal("txn body re-encodes differently")
				}
			}
		}
	})
}
