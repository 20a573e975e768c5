package main

import (
	"os"
	"testing"

	"github.com/kvd-project/kvd/internal/kvdtest"
)

// TestMain removes the kvd and kvctl build the process tests share (of
// both this package's tests and main_test's: one test binary).
func TestMain(m *testing.M) {
	code := m.Run()
	kvdtest.RemoveSharedBin()
	os.Exit(code)
}
