package chaos

import (
	"fmt"
	"testing"

	"github.com/anishathalye/porcupine"
)

// etcdInput is one clientv3 operation of the etcd history, on revKeys, in
// etcd's revision numbering (kvd's + 1):
//   - "put": Put Value to Key with prev_kv;
//   - "del": DeleteRange of Key alone, "del-all": of every key, with
//     prev_kv;
//   - "txn": if Key's mod_revision is Expect (0: absent), Put Value to the
//     keys Puts with prev_kv, else Range every key (etcd's
//     optimistic-concurrency pattern);
//   - "get": a linearizable Get of Key; "sget": a serializable one;
//   - "range": a linearizable Range of every key at the latest revision,
//     "range-at": at revision Rev;
//   - "compact": Compact at Rev.
type etcdInput struct {
	Op     string
	Key    int
	Value  string
	Expect uint64
	Puts   [2]int
	Rev    uint64
}

// etcdOutput is what an operation returned. Result: "ok", "unknown" (a
// write that failed: it may or may not have been applied), "compacted"
// (ErrCompacted), "future" (ErrFutureRev); a transaction's "ok" ran Then,
// "else" Else. Rev is the response header's revision. Keys: what a read
// returned (a Get: Keys[Key]), a transaction's Else Range or its Then
// Puts' prev_kvs (the keys of Puts), a Put's prev_kv (Keys[Key]) or a
// delete's prev_kvs. Deleted is a delete's count.
type etcdOutput struct {
	Result  string
	Rev     uint64
	Deleted int
	Keys    revKeySpace
}

// etcdStep is etcd's sequential specification of its KV service over
// revState (in etcd's numbering): every write that changes the store
// takes the next revision and answers it in its header, one that changes
// nothing answers the current one; prev_kv is the key before the write; a
// linearizable read answers the current state and revision; a read at a
// past revision answers that revision's state under the current revision
// (a linearizable read's header), ErrCompacted below the compaction and
// ErrFutureRev past the store's revision.
func etcdStep(state, input, output any) (bool, any) {
	s, in, out := state.(revState), input.(etcdInput), output.(etcdOutput)
	cur := s.Head
	switch in.Op {
	case "get":
		return out.Rev == cur.Rev && out.Keys[in.Key] == cur.Keys[in.Key], s
	case "sget":
		return sgetHolds(s, in.Key, out), s
	case "range":
		return out.Rev == cur.Rev && out.Keys == cur.Keys, s
	case "range-at":
		return rangeAtHolds(s, in.Rev, out), s
	case "compact":
		if out.Result == "ok" && out.Rev != cur.Rev {
			return false, s
		}
		return compactStep(s, in.Rev, out.Result)
	}
	keys, changed, ok := etcdWrite(cur.Keys, cur.Rev+1, in, out)
	if !ok {
		return false, s
	}
	if out.Result != "unknown" {
		want := cur.Rev
		if changed {
			want++
		}
		if out.Rev != want {
			return false, s
		}
	}
	if !changed {
		return true, s
	}
	return true, s.next(keys)
}

// sgetHolds checks a serializable Get, which may be stale, only for
// being a state the store was in: its revision not past the store's, and
// the key as it was at that revision when the model still holds it (not
// compacted away). It is not checked as linearizable.
func sgetHolds(s revState, key int, out etcdOutput) bool {
	if out.Rev > s.Head.Rev {
		return false
	}
	n := s.at(out.Rev)
	return n == nil || n.Keys[key] == out.Keys[key]
}

// rangeAtHolds checks a Range at revision rev answered out.
func rangeAtHolds(s revState, rev uint64, out etcdOutput) bool {
	switch out.Result {
	case "compacted":
		return rev < s.Compacted
	case "future":
		return rev > s.Head.Rev
	case "ok":
		n := s.at(rev)
		return rev >= s.Compacted && n != nil && out.Rev == s.Head.Rev && out.Keys == n.Keys
	}
	return false
}

// etcdWrite applies a write to keys at revision rev: the keys after it,
// whether it changed anything, and whether out fits it (prev_kv, the
// deleted count and prev_kvs, a transaction's branch and Else reads; the
// header revision is the caller's).
func etcdWrite(keys revKeySpace, rev uint64, in etcdInput, out etcdOutput) (revKeySpace, bool, bool) {
	unknown := out.Result == "unknown"
	switch in.Op {
	case "put":
		prev := keys[in.Key]
		keys[in.Key] = prev.written(in.Value, rev)
		return keys, true, unknown || out.Result == "ok" && out.Keys[in.Key] == prev
	case "del", "del-all":
		var prev revKeySpace
		n := 0
		for i := range keys {
			if (in.Op == "del-all" || i == in.Key) && keys[i].Exists {
				prev[i], keys[i] = keys[i], revKV{}
				n++
			}
		}
		return keys, n > 0, unknown || out.Result == "ok" && out.Deleted == n && out.Keys == prev
	case "txn":
		if keys[in.Key].Mod != in.Expect {
			return keys, false, unknown || out.Result == "else" && out.Keys == keys
		}
		ok := unknown || out.Result == "ok"
		for _, p := range in.Puts {
			ok = ok && (unknown || out.Keys[p] == keys[p])
			keys[p] = keys[p].written(in.Value, rev)
		}
		return keys, true, ok
	}
	return keys, false, false
}

// etcdModel checks an etcd history against one store (revisions are the
// whole store's); initial is the store when the history began, in
// etcd's numbering. States are revModel's.
func etcdModel(initial revState) porcupine.Model {
	m := revModel(initial)
	m.Step = etcdStep
	m.DescribeOperation = describeEtcdOp
	return m
}

func describeEtcdOp(input, output any) string {
	in, out := input.(etcdInput), output.(etcdOutput)
	var op string
	switch in.Op {
	case "put":
		op = fmt.Sprintf("put(%s, %q, prev_kv)", revKeys[in.Key], in.Value)
	case "del", "get", "sget":
		op = fmt.Sprintf("%s(%s)", in.Op, revKeys[in.Key])
	case "txn":
		op = fmt.Sprintf("txn(if mod(%s) = %d then put %s, %s = %q else range)", revKeys[in.Key], in.Expect, revKeys[in.Puts[0]], revKeys[in.Puts[1]], in.Value)
	case "range-at", "compact":
		op = fmt.Sprintf("%s(%d)", in.Op, in.Rev)
	default:
		op = in.Op
	}
	switch {
	case out.Result == "unknown" || out.Result == "compacted" || out.Result == "future":
		return op + " -> " + out.Result
	case in.Op == "get" || in.Op == "sget":
		return fmt.Sprintf("%s -> %s at rev %d", op, out.Keys[in.Key], out.Rev)
	case in.Op == "put":
		return fmt.Sprintf("%s -> rev %d, prev %s", op, out.Rev, out.Keys[in.Key])
	case in.Op == "del" || in.Op == "del-all":
		return fmt.Sprintf("%s -> deleted %d at rev %d, prev %s", op, out.Deleted, out.Rev, out.Keys)
	case in.Op == "txn" && out.Result == "ok":
		return fmt.Sprintf("%s -> then at rev %d", op, out.Rev)
	}
	return fmt.Sprintf("%s -> %s at rev %d: %s", op, out.Result, out.Rev, out.Keys)
}

// TestEtcdModel: the etcd model rejects what a KV service with broken
// revisions, prev_kv, compares or reads would answer, so that the fault
// test can fail.
func TestEtcdModel(t *testing.T) {
	op := func(client int, call, ret int64, in etcdInput, out etcdOutput) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret}
	}
	put := func(k int, v string) etcdInput { return etcdInput{Op: "put", Key: k, Value: v} }
	ok := func(rev uint64, prev ...revKV) etcdOutput {
		out := etcdOutput{Result: "ok", Rev: rev}
		copy(out.Keys[:], prev)
		return out
	}
	a6 := revKV{Exists: true, Value: "a", Create: 6, Mod: 6, Version: 1}
	b7 := revKV{Exists: true, Value: "b", Create: 6, Mod: 7, Version: 2}
	t7 := revKeySpace{{Exists: true, Value: "t", Create: 6, Mod: 7, Version: 2}, {Exists: true, Value: "t", Create: 7, Mod: 7, Version: 1}}
	get0, sget0 := etcdInput{Op: "get", Key: 0}, etcdInput{Op: "sget", Key: 0}
	at := func(rev uint64) etcdInput { return etcdInput{Op: "range-at", Rev: rev} }
	txn := func(expect uint64, v string) etcdInput {
		return etcdInput{Op: "txn", Key: 0, Expect: expect, Puts: [2]int{0, 1}, Value: v}
	}
	compact := func(rev uint64) etcdInput { return etcdInput{Op: "compact", Rev: rev} }
	// etcd revision 5 at the start, compacted at 1 (kvd's 0).
	start := revState{Head: &revNode{Rev: 5}, Compacted: 1}
	for _, tc := range []struct {
		name string
		ops  []porcupine.Operation
		ok   bool
	}{
		{"puts take the next revisions with prev_kv; a Get shows create, mod, version", []porcupine.Operation{
			op(0, 0, 1, put(0, "a"), ok(6)),
			op(0, 2, 3, put(0, "b"), ok(7, a6)),
			op(1, 4, 5, get0, ok(7, b7)),
		}, true},
		{"a put's header skips a revision", []porcupine.Operation{
			op(0, 0, 1, put(0, "a"), ok(6)),
			op(0, 2, 3, put(0, "b"), ok(8, a6)),
		}, false},
		{"prev_kv missing for a key that existed", []porcupine.Operation{
			op(0, 0, 1, put(0, "a"), ok(6)),
			op(0, 2, 3, put(0, "b"), ok(7)),
		}, false},
		{"prev_kv is the put itself", []porcupine.Operation{
			op(0, 0, 1, put(0, "a"), ok(6)),
			op(0, 2, 3, put(0, "b"), ok(7, revKV{Exists: true, Value: "b", Create: 6, Mod: 7, Version: 2})),
		}, false},
		{"a linearizable Get's header behind the store", []porcupine.Operation{
			op(0, 0, 1, put(0, "a"), ok(6)),
			op(0, 2, 3, put(1, "x"), ok(7)),
			op(1, 4, 5, get0, ok(6, a6)),
		}, false},
		{"a linearizable Get misses an acknowledged put", []porcupine.Operation{
			op(0, 0, 1, put(0, "a"), ok(6)),
			op(1, 2, 3, get0, ok(5)),
		}, false},
		{"a delete of nothing answers the current revision", []porcupine.Operation{
			op(0, 0, 1, etcdInput{Op: "del", Key: 1}, ok(5)),
			op(0, 2, 3, put(0, "a"), ok(6)),
		}, true},
		{"a delete of nothing takes a revision", []porcupine.Operation{
			op(0, 0, 1, etcdInput{Op: "del", Key: 1}, ok(6)),
		}, false},
		{"a range delete's prev_kvs and count", []porcupine.Operation{
			op(0, 0, 1, put(0, "a"), ok(6)),
			op(0, 2, 3, etcdInput{Op: "del-all"}, etcdOutput{Result: "ok", Rev: 7, Deleted: 1, Keys: revKeySpace{a6}}),
		}, true},
		{"a range delete's prev_kvs miss the key", []porcupine.Operation{
			op(0, 0, 1, put(0, "a"), ok(6)),
			op(0, 2, 3, etcdInput{Op: "del-all"}, etcdOutput{Result: "ok", Rev: 7, Deleted: 1}),
		}, false},
		{"a txn at the key's mod revision runs Then with prev_kvs; a second at the old one runs Else", []porcupine.Operation{
			op(0, 0, 1, put(0, "a"), ok(6)),
			op(0, 2, 3, txn(6, "t"), ok(7, a6)),
			op(1, 4, 5, txn(6, "u"), etcdOutput{Result: "else", Rev: 7, Keys: t7}),
		}, true},
		{"two txns at one mod revision both run Then", []porcupine.Operation{
			op(0, 0, 1, put(0, "a"), ok(6)),
			op(0, 2, 3, txn(6, "t"), ok(7, a6)),
			op(1, 4, 5, txn(6, "u"), ok(8, t7[:]...)),
		}, false},
		{"a txn's prev_kv is not the key before it", []porcupine.Operation{
			op(0, 0, 1, put(0, "a"), ok(6)),
			op(0, 2, 3, txn(6, "t"), ok(7)),
		}, false},
		{"a txn runs Else though the compare held", []porcupine.Operation{
			op(0, 0, 1, put(0, "a"), ok(6)),
			op(0, 2, 3, txn(6, "t"), etcdOutput{Result: "else", Rev: 6, Keys: revKeySpace{a6}}),
		}, false},
		{"a txn on an absent key compares its mod revision as 0", []porcupine.Operation{
			op(0, 0, 1, txn(0, "t"), etcdOutput{Result: "ok", Rev: 6}),
		}, true},
		{"a read at a past revision shows it, with the store's revision as header", []porcupine.Operation{
			op(0, 0, 1, put(0, "a"), ok(6)),
			op(0, 2, 3, put(0, "b"), ok(7, a6)),
			op(1, 4, 5, at(6), etcdOutput{Result: "ok", Rev: 7, Keys: revKeySpace{a6}}),
		}, true},
		{"a read at a past revision with it as header", []porcupine.Operation{
			op(0, 0, 1, put(0, "a"), ok(6)),
			op(0, 2, 3, put(0, "b"), ok(7, a6)),
			op(1, 4, 5, at(6), etcdOutput{Result: "ok", Rev: 6, Keys: revKeySpace{a6}}),
		}, false},
		{"a read at a past revision shows the latest", []porcupine.Operation{
			op(0, 0, 1, put(0, "a"), ok(6)),
			op(0, 2, 3, put(0, "b"), ok(7, a6)),
			op(1, 4, 5, at(6), etcdOutput{Result: "ok", Rev: 7, Keys: revKeySpace{b7}}),
		}, false},
		{"ErrCompacted below the compaction; the compaction's header is the store's", []porcupine.Operation{
			op(0, 0, 1, put(0, "a"), ok(6)),
			op(0, 2, 3, put(0, "b"), ok(7, a6)),
			op(0, 4, 5, compact(7), ok(7)),
			op(1, 6, 7, at(6), etcdOutput{Result: "compacted"}),
		}, true},
		{"ErrCompacted at the compaction revision", []porcupine.Operation{
			op(0, 0, 1, put(0, "a"), ok(6)),
			op(0, 2, 3, compact(6), ok(6)),
			op(1, 4, 5, at(6), etcdOutput{Result: "compacted"}),
		}, false},
		{"a compaction's header is not the store's revision", []porcupine.Operation{
			op(0, 0, 1, put(0, "a"), ok(6)),
			op(0, 2, 3, put(0, "b"), ok(7, a6)),
			op(0, 4, 5, compact(6), ok(6)),
		}, false},
		{"a serializable Get may be stale, at its revision", []porcupine.Operation{
			op(0, 0, 1, put(0, "a"), ok(6)),
			op(0, 2, 3, put(0, "b"), ok(7, a6)),
			op(1, 4, 5, sget0, ok(6, a6)),
		}, true},
		{"a serializable Get shows a value its revision did not hold", []porcupine.Operation{
			op(0, 0, 1, put(0, "a"), ok(6)),
			op(0, 2, 3, put(0, "b"), ok(7, a6)),
			op(1, 4, 5, sget0, ok(6, b7)),
		}, false},
		{"a serializable Get from the future", []porcupine.Operation{
			op(0, 0, 1, put(0, "a"), ok(6)),
			op(1, 2, 3, sget0, ok(7, a6)),
		}, false},
		{"a maybe-applied put, then a Get shows it", []porcupine.Operation{
			op(0, 0, 1<<62, put(0, "a"), etcdOutput{Result: "unknown"}),
			op(1, 2, 3, get0, ok(6, a6)),
		}, true},
		{"a linearizable Range's header is not the store's", []porcupine.Operation{
			op(0, 0, 1, put(0, "a"), ok(6)),
			op(1, 2, 3, etcdInput{Op: "range"}, etcdOutput{Result: "ok", Rev: 5, Keys: revKeySpace{a6}}),
		}, false},
	} {
		if got := porcupine.CheckOperations(etcdModel(start), tc.ops); got != tc.ok {
			t.Errorf("%s: linearizable %v, want %v", tc.name, got, tc.ok)
		}
	}
}
