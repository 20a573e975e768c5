package chaos

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/kvdtest"
)

// bin is where TestMain built kvd and kvctl; empty in -short mode. Tests
// reach it through procBin.
var bin string

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		// Every test that starts kvd processes skips: save the build.
		os.Exit(m.Run())
	}
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

// procBin returns the directory of the kvd and kvctl binaries, skipping
// the test in -short mode, where the fault tests on kvd processes (each
// a minute or more) do not run.
func procBin(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("skipping a multi-process fault test in -short mode")
	}
	return bin
}

// startCluster starts three kvd processes and waits for a leader.
func startCluster(t *testing.T, extra ...string) *kvdtest.ProcCluster {
	t.Helper()
	pc := kvdtest.StartProcCluster(t, procBin(t), 3, extra...)
	leaderOf(t, pc, 20*time.Second)
	return pc
}

// kvctl runs the kvctl binary against endpoints.
func kvctl(endpoints string, args ...string) (string, error) {
	out, err := exec.Command(filepath.Join(bin, "kvctl"), append([]string{"--endpoints", endpoints}, args...)...).CombinedOutput()
	return string(out), err
}
