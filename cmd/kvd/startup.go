package main

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvd-project/kvd/internal/store"
	"github.com/kvd-project/kvd/internal/version"
	"github.com/kvd-project/kvd/server"
)

// checkNewCluster refuses to create a cluster nobody asked for: a new data
// directory with neither --initial-cluster nor --join would bootstrap a
// single-node cluster of its own, which clients given its address would
// mistake for the real one, and which can never join another (it is
// refused --join from then on). The server library keeps an empty
// InitialCluster meaning "a single node"; the flags ask for it explicitly,
// as etcd's --initial-cluster names every member. A data directory that is
// not new restarts as what it holds, and needs neither flag.
func checkNewCluster(c *server.Config) error {
	if len(c.InitialCluster) > 0 || c.Join {
		return nil
	}
	ents, err := os.ReadDir(c.DataDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return &failure{err}
	}
	if len(ents) > 0 {
		return nil
	}
	return fmt.Errorf("--data-dir %s is new, and neither --initial-cluster nor --join is given: "+
		"give --initial-cluster %d=%s for a single-node cluster, or --join to join one", c.DataDir, c.ID, cmp.Or(c.ListenPeer, c.Listen))
}

// checkDataDirFree refuses a data directory another process holds (Pebble
// locks DIR/LOCK with fcntl while it has the directory open), naming the
// directory and the holder, before this node opens anything in it.
func checkDataDirFree(dir string) error {
	pid, err := lockHolder(filepath.Join(dir, "LOCK"))
	if err != nil || pid == 0 {
		return nil // no LOCK file yet, or nobody holds it: the open decides
	}
	return &failure{inUse(dir, pid)}
}

// inUse is the error for a data directory held by process pid (0: unknown).
func inUse(dir string, pid int) error {
	holder := "another process"
	if pid > 0 {
		holder = fmt.Sprintf("another process (pid %d)", pid)
		if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil {
			holder = fmt.Sprintf("another %s (pid %d)", strings.TrimSpace(string(comm)), pid)
		}
	}
	return fmt.Errorf("data dir %s is in use by %s: stop it, or give this node another --data-dir", dir, holder)
}

// openErr is the one line kvd exits with when the node did not open: a
// data directory of another data format is refused in the store's own
// words, which name the way forward, without the layers it went through.
func openErr(dir string, err error) error {
	var fe *store.FormatError
	if errors.As(err, &fe) {
		return fe
	}
	return lockedErr(dir, err)
}

// lockedErr names the holder when opening the data directory failed on its
// lock (taken between checkDataDirFree and the open), and returns other
// errors as they are.
func lockedErr(dir string, err error) error {
	if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EACCES) && strings.Contains(err.Error(), "LOCK") {
		pid, _ := lockHolder(filepath.Join(dir, "LOCK"))
		return inUse(dir, pid)
	}
	return err
}

// buildInfo is kvd_build_info, 1 with the build's labels, as Prometheus
// exporters publish theirs: version queries join on it.
func buildInfo() prometheus.Collector {
	i := version.Get()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "kvd_build_info",
		Help: "1, labelled with this build's version, Go version and VCS revision",
		ConstLabels: prometheus.Labels{
			"version": i.Version, "goversion": i.GoVersion, "revision": i.Revision,
		},
	})
	g.Set(1)
	return g
}

// versionBody is /version's JSON, as etcd's /version answers
// {"etcdserver": ...}: what an operator or a script checks before and
// after an upgrade without reading /metrics.
func versionBody() map[string]string {
	i := version.Get()
	return map[string]string{"kvd": i.Version, "revision": i.Revision, "go": i.GoVersion}
}
