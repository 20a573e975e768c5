package putgroup

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/kvd-project/kvd/internal/errs"
	"github.com/kvd-project/kvd/internal/limits"
)

// TestGroupTakesWhatOneTransactionHolds checks which waiting PUTs join a
// group: the longest waiting first, up to a transaction's operations and
// bytes; a key twice does not end it (the later value is put).
func TestConfigWithoutClientIsRefused(t *testing.T) {
	if _, err := New(Config{}); !errors.Is(err, errs.ErrConfig) {
		t.Errorf("New without a Client: %v, want errs.ErrConfig", err)
	}
}

func TestGroupTakesWhatOneTransactionHolds(t *testing.T) {
	keys := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprint("k", i)
		}
		return out
	}
	big := strings.Repeat("v", 400<<10)
	tests := []struct {
		name    string
		first   string
		waiting []string // keys
		value   string
		want    int // PUTs taken from waiting
	}{
		{name: "all of a few", first: "a", waiting: []string{"b", "c"}, value: "v", want: 2},
		{name: "operations bound", first: "a", waiting: keys(200), value: "v", want: limits.MaxTxnOps - 1},
		{name: "bytes bound", first: "a", waiting: keys(3), value: big, want: 1},
		{name: "a key twice", first: "a", waiting: []string{"b", "a", "c"}, value: "v", want: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &Group{waiting: []*pending{{key: []byte(tt.first), val: []byte(tt.value)}}}
			for _, k := range tt.waiting {
				g.waiting = append(g.waiting, &pending{key: []byte(k), val: []byte(tt.value)})
			}
			rest := slices.Clone(g.waiting[1+tt.want:])
			batch := g.takeLocked()
			if len(batch) != tt.want+1 {
				t.Fatalf("group of %d, want %d", len(batch), tt.want+1)
			}
			if !slices.Equal(g.waiting, rest) {
				t.Errorf("%d left waiting, want %d (the ones not taken, in order)", len(g.waiting), len(rest))
			}
		})
	}
}
