package chaos

import (
	"fmt"

	"github.com/anishathalye/porcupine"
)

// casInput is one operation of the compare-and-swap history, on one key:
// "get" (GetModRevision), "put" and "del" (plain), "cas-put" and "cas-del"
// (IfVersion(Expect)).
type casInput struct {
	Op     string
	Key    string
	Value  string
	Expect uint64
}

// casOutput is what it returned. Result: "ok", "conflict" (Version is the
// key's version the conflict named), "notfound" (a GET's miss, a plain
// DELETE's, or a cas-del at version 0 of an absent key), or "unknown"
// (failed: may or may not have taken effect). Version is also a GET's
// version and a PUT's new one.
type casOutput struct {
	Result  string
	Value   string
	Version uint64
	Via     string // how a GET was answered, for descriptions only
}

// casState is one key: absent, or Value at Version. Version 0 for a key
// that exists means "not known yet": written by a PUT whose outcome was
// unknown. The first operation that reveals it (a GET, a conflict, a
// successful swap) fills it in; a version is the Raft index of its write,
// fixed once the write is applied, so learning it is sound.
type casState struct {
	Exists  bool
	Value   string
	Version uint64
}

// tri is a condition the model may be unable to decide (unknown version).
type tri int

const (
	no tri = iota
	yes
	maybe
)

// holds says whether "the key's version is expect" holds in s.
func (s casState) holds(expect uint64) tri {
	switch {
	case !s.Exists:
		return map[bool]tri{true: yes, false: no}[expect == 0]
	case expect == 0:
		return no
	case s.Version == 0:
		return maybe
	}
	return map[bool]tri{true: yes, false: no}[s.Version == expect]
}

// conflictOK reports whether a conflict naming version c fits s, and
// returns s with the version learned.
func (s casState) conflictOK(expect, c uint64) (casState, bool) {
	switch {
	case !s.Exists:
		return s, c == 0 && expect != 0
	case c == 0 || c == expect || s.Version != 0 && s.Version != c:
		return s, false
	}
	s.Version = c
	return s, true
}

// casStep is the sequential specification: the states a key can be in
// after the operation (none: the output is impossible).
func casStep(state, input, output any) []any {
	s, in, out := state.(casState), input.(casInput), output.(casOutput)
	put := casState{Exists: true, Value: in.Value, Version: out.Version}
	if out.Result == "unknown" {
		put.Version = 0
	}
	switch in.Op {
	case "get":
		if out.Result == "notfound" {
			return when(!s.Exists, s)
		}
		if !s.Exists || out.Value != s.Value || s.Version != 0 && s.Version != out.Version {
			return nil
		}
		s.Version = out.Version
		return []any{s}
	case "put":
		return []any{put}
	case "del":
		switch out.Result {
		case "unknown":
			return []any{casState{}}
		case "notfound":
			return when(!s.Exists, casState{})
		}
		return when(s.Exists, casState{})
	}
	// Conditional writes.
	h := s.holds(in.Expect)
	applied := put
	if in.Op == "cas-del" {
		applied = casState{}
	}
	switch out.Result {
	case "ok":
		return when(h != no && (in.Op == "cas-put" || s.Exists), applied)
	case "notfound": // cas-del at version 0 of an absent key: held, nothing to delete
		return when(in.Op == "cas-del" && h == yes && !s.Exists, s)
	case "conflict":
		learned, ok := s.conflictOK(in.Expect, out.Version)
		return when(ok && h != yes, learned)
	case "unknown":
		switch h {
		case yes:
			return []any{applied}
		case no:
			return []any{s}
		}
		return []any{applied, s}
	}
	return nil
}

func when(ok bool, s casState) []any {
	if !ok {
		return nil
	}
	return []any{s}
}

// partitionByKey splits a history of single-key operations by key (key
// reads an operation's input's), in order of first appearance: each key
// is checked on its own.
func partitionByKey(key func(input any) string) func([]porcupine.Operation) [][]porcupine.Operation {
	return func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := key(op.Input)
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	}
}

// casModel checks a history of compare-and-swap operations per key.
var casModel = (&porcupine.NondeterministicModel{
	Partition: partitionByKey(func(in any) string { return in.(casInput).Key }),
	Init:      func() []any { return []any{casState{}} },
	Step:      casStep,
	DescribeOperation: func(input, output any) string {
		in, out := input.(casInput), output.(casOutput)
		arg := ""
		switch in.Op {
		case "put", "cas-put":
			arg = fmt.Sprintf(", %q", in.Value)
		}
		if in.Op == "cas-put" || in.Op == "cas-del" {
			arg += fmt.Sprintf(", if version %d", in.Expect)
		}
		return fmt.Sprintf("%s(%s%s) -> %s %q v%d %s", in.Op, in.Key, arg, out.Result, out.Value, out.Version, out.Via)
	},
	DescribeState: func(state any) string {
		s := state.(casState)
		if !s.Exists {
			return "<none>"
		}
		return fmt.Sprintf("%q v%d", s.Value, s.Version)
	},
}).ToModel()
