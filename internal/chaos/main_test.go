package chaos

import (
	"fmt"
	"os"
	"testing"

	"github.com/kvd-project/kvd/internal/kvdtest"
)

// bin is where TestMain built kvd and kvctl.
var bin string

func TestMain(m *testing.M) {
	dir, cleanup, err := kvdtest.TempBin()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = dir
	code := m.Run()
	cleanup()
	os.Exit(code)
}
