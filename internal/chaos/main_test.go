package chaos

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

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

// startCluster starts three kvd processes and waits for a leader.
func startCluster(t *testing.T, extra ...string) *kvdtest.ProcCluster {
	t.Helper()
	pc := kvdtest.StartProcCluster(t, bin, 3, extra...)
	leaderOf(t, pc, 20*time.Second)
	return pc
}

// kvctl runs the kvctl binary against endpoints.
func kvctl(endpoints string, args ...string) (string, error) {
	out, err := exec.Command(filepath.Join(bin, "kvctl"), append([]string{"--endpoints", endpoints}, args...)...).CombinedOutput()
	return string(out), err
}
