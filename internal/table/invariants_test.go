package table

import (
	"strings"
	"testing"

	"github.com/kvd-project/kvd/internal/invariants"
)

// TestInvariantsCatchModifiedRecord: a published record modified in place
// (what a writer bug reusing live space would do) is caught when it is
// retired, in builds with invariants on.
func TestInvariantsCatchModifiedRecord(t *testing.T) {
	if !invariants.Enabled {
		t.Skip("SKIPPED: invariants are off in this build (run with -race or -tags invariants)")
	}
	tab, mem, _ := newTable(t, 64<<10, Config{})
	if err := tab.Put([]byte("k"), []byte("value"), 1); err != nil {
		t.Fatal(err)
	}
	s := DecodeSlot(slotOf(t, tab, []byte("k")))
	mem[s.Offset+recKey+1] ^= 0xff // into the value, past the key
	defer func() {
		r := recover()
		if r == nil || !strings.Contains(r.(string), "modified before it was retired") {
			t.Fatalf("no invariant panic for a modified live record: %v", r)
		}
	}()
	tab.Put([]byte("k"), []byte("new"), 2)
}
