package store

import (
	"fmt"
	"os"

	"github.com/kvd-project/kvd/internal/revision"
)

// Example_history writes a key three times and deletes it, reads it at
// each revision, compacts, and watches from above the compaction point.
func Example_history() {
	dir, _ := os.MkdirTemp("", "history")
	defer os.RemoveAll(dir)
	s, _ := Open(dir, Options{})
	defer s.Close()
	var m revision.Meta
	for rev := uint64(1); rev <= 4; rev++ {
		u := s.NewUpdate()
		if rev < 4 {
			m = m.Next(rev, 0)
			_ = u.RecordHistory([]byte("k"), fmt.Appendf(nil, "v%d", rev), m, false)
		} else {
			_ = u.RecordHistory([]byte("k"), nil, revision.Meta{Mod: rev}, true)
		}
		_ = u.SetRevision(rev)
		_ = u.Commit(false)
	}
	show := func(rev uint64) {
		at, err := s.RangeAt(nil, nil, rev, func(k, v []byte, m revision.Meta) bool {
			fmt.Printf("at %d: %s=%s create=%d mod=%d version=%d\n", rev, k, v, m.Create, m.Mod, m.Version)
			return true
		})
		if err != nil {
			fmt.Printf("at %d: %v\n", rev, err)
		} else if rev == 4 || rev == 0 {
			fmt.Printf("at %d: (read at %d) nothing more\n", rev, at)
		}
	}
	for _, rev := range []uint64{1, 2, 3, 4, 5} {
		show(rev)
	}
	u := s.NewUpdate()
	_ = u.Compact(2)
	_ = u.Commit(false)
	show(1)
	show(2)
	_, err := s.Changes(2, func(Change) bool { return true })
	fmt.Println("changes from 2:", err)
	_, _ = s.Changes(3, func(ev Change) bool {
		fmt.Printf("change at %d: %s=%s deleted=%v prev=%s (mod %d)\n", ev.Meta.Mod, ev.Key, ev.Value, ev.Deleted, ev.PrevValue, ev.PrevMeta.Mod)
		return true
	})
	// Output:
	// at 1: k=v1 create=1 mod=1 version=1
	// at 2: k=v2 create=1 mod=2 version=2
	// at 3: k=v3 create=1 mod=3 version=3
	// at 4: (read at 4) nothing more
	// at 5: mvcc: required revision is a future revision: revision 5, current 4
	// at 1: mvcc: required revision has been compacted: revision 1, compacted at 2
	// at 2: k=v2 create=1 mod=2 version=2
	// changes from 2: mvcc: required revision has been compacted: changes from revision 2, compacted at 2
	// change at 3: k=v3 deleted=false prev=v2 (mod 2)
	// change at 4: k= deleted=true prev=v3 (mod 3)
}
