package chaos

import (
	"fmt"
	"hash/maphash"
	"strings"
	"testing"

	"github.com/anishathalye/porcupine"
)

// revKeys is the revision test's whole key space: few keys, so that the
// model's states stay small and porcupine's check quick.
var revKeys = [3]string{"r0", "r1", "r2"}

// revKV is one key as a read shows it: absent, or a value with etcd's
// metadata (create and mod revision, version since creation).
type revKV struct {
	Exists               bool
	Value                string
	Create, Mod, Version uint64
}

func (k revKV) String() string {
	if !k.Exists {
		return "<none>"
	}
	return fmt.Sprintf("%q c%d m%d v%d", k.Value, k.Create, k.Mod, k.Version)
}

// written is k after a PUT of value at revision rev.
func (k revKV) written(value string, rev uint64) revKV {
	if !k.Exists {
		return revKV{Exists: true, Value: value, Create: rev, Mod: rev, Version: 1}
	}
	k.Value, k.Mod, k.Version = value, rev, k.Version+1
	return k
}

// revKeySpace is every key of revKeys at one revision.
type revKeySpace [len(revKeys)]revKV

func (ks revKeySpace) String() string {
	parts := make([]string, len(ks))
	for i, k := range ks {
		parts[i] = revKeys[i] + "=" + k.String()
	}
	return strings.Join(parts, " ")
}

// revNode is the key space at store revision Rev; Prev is the node of
// revision Rev-1 (nil: compacted away, or before the history began).
// Nodes are never changed once made: states of porcupine's search share
// them.
type revNode struct {
	Rev  uint64
	Keys revKeySpace
	Prev *revNode
}

// revState is the store: its revision and keys (Head), every earlier
// revision's keys down to the compaction revision (Head's chain), and the
// compaction revision (reads below it fail with ErrCompacted).
type revState struct {
	Head      *revNode
	Compacted uint64
}

// at returns the node of revision rev, or nil if the state does not hold
// it.
func (s revState) at(rev uint64) *revNode {
	n := s.Head
	for n != nil && n.Rev > rev {
		n = n.Prev
	}
	if n == nil || n.Rev != rev {
		return nil
	}
	return n
}

// next is s with keys as the next revision's.
func (s revState) next(keys revKeySpace) revState {
	s.Head = &revNode{Rev: s.Head.Rev + 1, Keys: keys, Prev: s.Head}
	return s
}

// compact is s compacted at rev: the revisions below it forgotten, which
// bounds what the model keeps.
func (s revState) compact(rev uint64) revState {
	var keep []*revNode
	for n := s.Head; n != nil && n.Rev >= rev; n = n.Prev {
		keep = append(keep, n)
	}
	var prev *revNode
	for i := len(keep) - 1; i >= 0; i-- {
		n := *keep[i]
		n.Prev = prev
		prev = &n
	}
	return revState{Head: prev, Compacted: rev}
}

// revInput is one operation of the revision history:
//   - "put": PUT Value to Key; "del": delete Key (a range delete of one
//     key); "del-all": delete every key (one range delete);
//   - "txn": if Key's version is Expect, PUT Value to the keys Puts, else
//     GET every key;
//   - "get": GET Key (one-sided, or by RPC); "range": every key at the
//     latest revision (a linearizable scan);
//   - "range-at": every key at revision Rev (a scan with WithRev);
//   - "compact": compact the history at Rev.
type revInput struct {
	Op     string
	Key    int
	Value  string
	Expect uint64
	Puts   [2]int
	Rev    uint64
}

// revOutput is what an operation returned. Result: "ok", "unknown" (a
// write that failed: it may or may not have been applied), "compacted"
// (ErrCompacted), "future" (ErrFutureRevision); a transaction's "ok" ran
// Then, "else" Else. Rev: the write's revision; a scan's revision (the one
// it shows); a GET's served revision (0: not told). Keys: what a read
// returned (a GET: Keys[Key]); a transaction's GETs (Else), or its PUTs'
// results (Then: the keys of Puts). Partial: a GET answered by RPC, which
// gives only the mod revision of the metadata.
type revOutput struct {
	Result  string
	Rev     uint64
	Deleted int
	Keys    revKeySpace
	Partial bool
	Via     string
}

// revStep is the sequential specification of the store: a write takes
// the next revision exactly when it changes something, reads show the
// state at the revision they name, compaction moves only forward and
// never past the store revision.
func revStep(state, input, output any) (bool, any) {
	s, in, out := state.(revState), input.(revInput), output.(revOutput)
	cur := s.Head
	switch in.Op {
	case "get":
		return getHolds(cur, in.Key, out), s
	case "range":
		return out.Rev == cur.Rev && out.Keys == cur.Keys, s
	case "range-at":
		switch out.Result {
		case "compacted":
			return in.Rev < s.Compacted, s
		case "future":
			return in.Rev > cur.Rev, s
		}
		n := s.at(in.Rev)
		return in.Rev >= s.Compacted && n != nil && out.Rev == in.Rev && out.Keys == n.Keys, s
	case "compact":
		return compactStep(s, in.Rev, out.Result)
	}
	keys, changed, ok := applyWrite(cur.Keys, cur.Rev+1, in, out)
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

// getHolds says whether a GET of key i could return out from the store
// at cur: the key's value and metadata, and a served revision (when
// told) at which the key held them and that is not in the future
// (docs/layout.md, "The revision word": a one-sided GET's revision is a
// lower bound of the node's).
func getHolds(cur *revNode, i int, out revOutput) bool {
	k, got := cur.Keys[i], out.Keys[i]
	switch {
	case !got.Exists || !k.Exists:
		return got.Exists == k.Exists
	case out.Partial:
		return got.Value == k.Value && got.Mod == k.Mod
	}
	return got == k && (out.Rev == 0 || k.Mod <= out.Rev && out.Rev <= cur.Rev)
}

// compactStep is a compaction at rev answered result. A compaction the
// client retried after an attempt that may have been applied is answered
// ErrCompacted by the retry: "compacted" may also be the compaction
// itself, applied.
func compactStep(s revState, rev uint64, result string) (bool, any) {
	applies := s.Compacted < rev && rev <= s.Head.Rev
	switch result {
	case "ok":
		if !applies {
			return false, s
		}
	case "future":
		return rev > s.Head.Rev, s
	case "compacted":
		if rev <= s.Compacted {
			return true, s
		}
		if !applies {
			return false, s
		}
	case "unknown":
		if !applies {
			return true, s
		}
	default:
		return false, s
	}
	return true, s.compact(rev)
}

// applyWrite applies a write to keys at revision rev: the keys after it,
// whether it changed anything, and whether out fits it (Deleted, a
// transaction's branch and results; the revision is the caller's).
func applyWrite(keys revKeySpace, rev uint64, in revInput, out revOutput) (revKeySpace, bool, bool) {
	unknown := out.Result == "unknown"
	switch in.Op {
	case "put":
		keys[in.Key] = keys[in.Key].written(in.Value, rev)
		return keys, true, true
	case "del", "del-all":
		n := 0
		for i := range keys {
			if (in.Op == "del-all" || i == in.Key) && keys[i].Exists {
				keys[i] = revKV{}
				n++
			}
		}
		return keys, n > 0, unknown || out.Deleted == n
	case "txn":
		if keys[in.Key].Version != in.Expect {
			return keys, false, unknown || out.Result == "else" && out.Keys == keys
		}
		for _, p := range in.Puts {
			keys[p] = keys[p].written(in.Value, rev)
		}
		if unknown {
			return keys, true, true
		}
		ok := out.Result == "ok"
		for _, p := range in.Puts {
			ok = ok && out.Keys[p] == keys[p]
		}
		return keys, true, ok
	}
	return keys, false, false
}

var revSeed = maphash.MakeSeed()

// revModel checks a history of the revision workload against one store
// (not key by key: the revision is the whole store's). initial is the
// store when the history began.
func revModel(initial revState) porcupine.Model {
	return porcupine.Model{
		Init: func() any { return initial },
		Step: revStep,
		Equal: func(a, b any) bool {
			x, y := a.(revState), b.(revState)
			if x.Compacted != y.Compacted {
				return false
			}
			for m, n := x.Head, y.Head; m != n; m, n = m.Prev, n.Prev {
				if m == nil || n == nil || m.Rev != n.Rev || m.Keys != n.Keys {
					return false
				}
			}
			return true
		},
		Hash: func(state any) uint64 {
			s := state.(revState)
			return maphash.Comparable(revSeed, struct {
				Rev, Compacted uint64
				Keys           revKeySpace
			}{s.Head.Rev, s.Compacted, s.Head.Keys})
		},
		DescribeOperation: describeRevOp,
		DescribeState: func(state any) string {
			s := state.(revState)
			return fmt.Sprintf("rev %d (compacted %d): %s", s.Head.Rev, s.Compacted, s.Head.Keys)
		},
	}
}

func describeRevOp(input, output any) string {
	in, out := input.(revInput), output.(revOutput)
	var op string
	switch in.Op {
	case "put":
		op = fmt.Sprintf("put(%s, %q)", revKeys[in.Key], in.Value)
	case "del", "get":
		op = fmt.Sprintf("%s(%s)", in.Op, revKeys[in.Key])
	case "txn":
		op = fmt.Sprintf("txn(if version(%s) = %d then put %s, %s = %q)", revKeys[in.Key], in.Expect, revKeys[in.Puts[0]], revKeys[in.Puts[1]], in.Value)
	case "range-at", "compact":
		op = fmt.Sprintf("%s(%d)", in.Op, in.Rev)
	default:
		op = in.Op
	}
	res := out.Result
	switch {
	case out.Result == "unknown" || out.Result == "compacted" || out.Result == "future":
	case in.Op == "get" && out.Partial:
		res = fmt.Sprintf("%q m%d [%s]", out.Keys[in.Key].Value, out.Keys[in.Key].Mod, out.Via)
	case in.Op == "get":
		res = fmt.Sprintf("%s at rev %d [%s]", out.Keys[in.Key], out.Rev, out.Via)
	case in.Op == "range" || in.Op == "range-at" || in.Op == "txn" && out.Result == "else":
		res = fmt.Sprintf("%s at rev %d: %s", out.Result, out.Rev, out.Keys)
	case in.Op == "del" || in.Op == "del-all":
		res = fmt.Sprintf("deleted %d at rev %d", out.Deleted, out.Rev)
	default:
		res = fmt.Sprintf("%s at rev %d", out.Result, out.Rev)
	}
	return op + " -> " + res
}

// TestRevisionModel: the model rejects what broken revisions would do, so
// that the fault test can fail.
func TestRevisionModel(t *testing.T) {
	op := func(client int, call, ret int64, in revInput, out revOutput) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret}
	}
	put := func(k int, v string) revInput { return revInput{Op: "put", Key: k, Value: v} }
	at := func(rev uint64) revInput { return revInput{Op: "range-at", Rev: rev} }
	ok := func(rev uint64) revOutput { return revOutput{Result: "ok", Rev: rev} }
	a5 := revKV{Exists: true, Value: "a", Create: 5, Mod: 5, Version: 1}
	b6 := revKV{Exists: true, Value: "b", Create: 5, Mod: 6, Version: 2}
	get0 := revInput{Op: "get", Key: 0}
	gotKey := func(k revKV, rev uint64) revOutput { return revOutput{Result: "ok", Rev: rev, Keys: revKeySpace{k}} }
	// Revision 4 at the start, nothing compacted.
	start := revState{Head: &revNode{Rev: 4}}
	for _, tc := range []struct {
		name string
		ops  []porcupine.Operation
		ok   bool
	}{
		{"writes take the next revisions; a GET shows create, mod, version", []porcupine.Operation{
			op(0, 0, 1, put(0, "a"), ok(5)),
			op(0, 2, 3, put(0, "b"), ok(6)),
			op(1, 4, 5, get0, gotKey(b6, 6)),
		}, true},
		{"a revision skipped", []porcupine.Operation{
			op(0, 0, 1, put(0, "a"), ok(5)),
			op(0, 2, 3, put(1, "b"), ok(7)),
		}, false},
		{"two writes at one revision", []porcupine.Operation{
			op(0, 0, 3, put(0, "a"), ok(5)),
			op(1, 1, 2, put(1, "b"), ok(5)),
		}, false},
		{"a version that does not count the writes", []porcupine.Operation{
			op(0, 0, 1, put(0, "a"), ok(5)),
			op(0, 2, 3, put(0, "b"), ok(6)),
			op(1, 4, 5, get0, gotKey(revKV{Exists: true, Value: "b", Create: 5, Mod: 6, Version: 1}, 6)),
		}, false},
		{"a create revision that moved with the write", []porcupine.Operation{
			op(0, 0, 1, put(0, "a"), ok(5)),
			op(0, 2, 3, put(0, "b"), ok(6)),
			op(1, 4, 5, get0, gotKey(revKV{Exists: true, Value: "b", Create: 6, Mod: 6, Version: 2}, 6)),
		}, false},
		{"a GET served at a revision in the future", []porcupine.Operation{
			op(0, 0, 1, put(0, "a"), ok(5)),
			op(1, 2, 3, get0, gotKey(a5, 6)),
		}, false},
		{"a delete of nothing takes no revision", []porcupine.Operation{
			op(0, 0, 1, revInput{Op: "del", Key: 1}, revOutput{Result: "ok", Rev: 4}),
			op(0, 2, 3, put(0, "a"), ok(5)),
		}, true},
		{"a delete of nothing takes a revision", []porcupine.Operation{
			op(0, 0, 1, revInput{Op: "del", Key: 1}, revOutput{Result: "ok", Rev: 5}),
		}, false},
		{"a read at a past revision shows that revision", []porcupine.Operation{
			op(0, 0, 1, put(0, "a"), ok(5)),
			op(0, 2, 3, put(0, "b"), ok(6)),
			op(1, 4, 5, at(5), revOutput{Result: "ok", Rev: 5, Keys: revKeySpace{a5}}),
			op(1, 6, 7, at(4), revOutput{Result: "ok", Rev: 4}),
		}, true},
		{"a read at a past revision shows the latest", []porcupine.Operation{
			op(0, 0, 1, put(0, "a"), ok(5)),
			op(0, 2, 3, put(0, "b"), ok(6)),
			op(1, 4, 5, at(5), revOutput{Result: "ok", Rev: 5, Keys: revKeySpace{b6}}),
		}, false},
		{"compacted below the compaction, readable at it", []porcupine.Operation{
			op(0, 0, 1, put(0, "a"), ok(5)),
			op(0, 2, 3, revInput{Op: "compact", Rev: 5}, revOutput{Result: "ok"}),
			op(1, 4, 5, at(4), revOutput{Result: "compacted"}),
			op(1, 6, 7, at(5), revOutput{Result: "ok", Rev: 5, Keys: revKeySpace{a5}}),
		}, true},
		{"ErrCompacted at the compaction revision", []porcupine.Operation{
			op(0, 0, 1, put(0, "a"), ok(5)),
			op(0, 2, 3, revInput{Op: "compact", Rev: 5}, revOutput{Result: "ok"}),
			op(1, 4, 5, at(5), revOutput{Result: "compacted"}),
		}, false},
		{"ErrCompacted with nothing compacted", []porcupine.Operation{
			op(0, 0, 1, put(0, "a"), ok(5)),
			op(1, 2, 3, at(4), revOutput{Result: "compacted"}),
		}, false},
		{"a compaction past the store revision", []porcupine.Operation{
			op(0, 0, 1, revInput{Op: "compact", Rev: 5}, revOutput{Result: "ok"}),
		}, false},
		{"a maybe-applied compaction, then a read below it compacted", []porcupine.Operation{
			op(0, 0, 1, put(0, "a"), ok(5)),
			op(0, 2, 1<<62, revInput{Op: "compact", Rev: 5}, revOutput{Result: "unknown"}),
			op(1, 4, 5, at(4), revOutput{Result: "compacted"}),
		}, true},
		{"ErrFutureRevision for a revision that exists", []porcupine.Operation{
			op(0, 0, 1, put(0, "a"), ok(5)),
			op(1, 2, 3, at(5), revOutput{Result: "future"}),
		}, false},
		{"a transaction's PUTs share its revision", []porcupine.Operation{
			op(0, 0, 1, revInput{Op: "txn", Key: 2, Puts: [2]int{0, 1}, Value: "a"},
				revOutput{Result: "ok", Rev: 5, Keys: revKeySpace{a5, {Exists: true, Value: "a", Create: 5, Mod: 5, Version: 1}}}),
			op(1, 2, 3, revInput{Op: "range"}, revOutput{Result: "ok", Rev: 5, Keys: revKeySpace{a5, a5}}),
		}, true},
		{"a range delete takes one revision for every key", []porcupine.Operation{
			op(0, 0, 1, put(0, "a"), ok(5)),
			op(0, 2, 3, put(1, "a"), ok(6)),
			op(0, 4, 5, revInput{Op: "del-all"}, revOutput{Result: "ok", Deleted: 2, Rev: 8}),
		}, false},
		{"a maybe-applied PUT fills the revision a later write skips", []porcupine.Operation{
			op(0, 0, 1<<62, put(1, "x"), revOutput{Result: "unknown"}),
			op(1, 2, 3, put(0, "a"), ok(6)),
		}, true},
	} {
		if got := porcupine.CheckOperations(revModel(start), tc.ops); got != tc.ok {
			t.Errorf("%s: linearizable %v, want %v", tc.name, got, tc.ok)
		}
	}
}
