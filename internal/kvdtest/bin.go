package kvdtest

import (
	"sync"
	"testing"
)

// shared is SharedBin's build.
var shared struct {
	once    sync.Once
	dir     string
	cleanup func()
	err     error
}

// SharedBin returns a directory holding kvd and kvctl, built (TempBin) at
// its first call in this test binary and shared by every later one: a
// build takes seconds, more on a loaded machine. The test binary's
// TestMain removes it with RemoveSharedBin.
func SharedBin(t testing.TB) string {
	t.Helper()
	shared.once.Do(func() {
		shared.dir, shared.cleanup, shared.err = TempBin()
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.dir
}

// RemoveSharedBin removes SharedBin's build, if there was one.
func RemoveSharedBin() {
	if shared.cleanup != nil {
		shared.cleanup()
	}
}
