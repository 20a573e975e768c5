package chaos

import (
	"fmt"

	"github.com/anishathalye/porcupine"
)

// kvInput is one operation on one key.
type kvInput struct {
	Op    string // "get", "put", "del"
	Key   string
	Value string
}

// kvOutput is what the operation returned. Unknown marks an operation that
// failed or timed out: it may or may not have taken effect. Found is a
// GET's hit, or a DELETE's report that the key existed.
type kvOutput struct {
	Value   string
	Found   bool
	Unknown bool
	Via     string // how a GET was answered ("one-sided", "rpc", "readindex"), for descriptions only
}

type kvState struct {
	Value  string
	Exists bool
}

// kvModel is a single-key register with delete, partitioned by key.
var kvModel = porcupine.Model{
	Partition: partitionByKey(func(in any) string { return in.(kvInput).Key }),
	Init:      func() any { return kvState{} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(kvState), input.(kvInput), output.(kvOutput)
		switch in.Op {
		case "get":
			return out.Found == s.Exists && (!s.Exists || out.Value == s.Value), s
		case "put":
			return true, kvState{Value: in.Value, Exists: true}
		case "del":
			// The client retries a write only while no attempt can have
			// been applied, so a completed DELETE's "found" is exact: it
			// must match whether the key existed.
			return out.Unknown || out.Found == s.Exists, kvState{}
		}
		return false, s
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(kvInput), output.(kvOutput)
		switch {
		case out.Unknown:
			return fmt.Sprintf("%s(%s, %q) -> ?", in.Op, in.Key, in.Value)
		case in.Op == "get" && !out.Found:
			return fmt.Sprintf("get(%s) -> not found [%s]", in.Key, out.Via)
		case in.Op == "get":
			return fmt.Sprintf("get(%s) -> %q [%s]", in.Key, out.Value, out.Via)
		}
		return fmt.Sprintf("%s(%s, %q) -> found=%v", in.Op, in.Key, in.Value, out.Found)
	},
	DescribeState: func(state any) string {
		s := state.(kvState)
		if !s.Exists {
			return "<none>"
		}
		return fmt.Sprintf("%q", s.Value)
	},
}
