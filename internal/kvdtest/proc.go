package kvdtest

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Build compiles kvd and kvctl into dir and returns dir.
func Build(dir string, tags ...string) (string, error) {
	args := []string{"build", "-o", dir + "/"}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	args = append(args, "github.com/kvd-project/kvd/cmd/kvd", "github.com/kvd-project/kvd/cmd/kvctl")
	out, err := exec.Command("go", args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return dir, nil
}

// Proc is one kvd node running as a separate process, so it can be killed
// with SIGKILL and restarted from its data directory.
type Proc struct {
	ID          uint64
	Addr        string
	MetricsAddr string
	DataDir     string
	args        []string
	bin         string

	mu   sync.Mutex
	cmd  *exec.Cmd
	logs *bytes.Buffer
	done chan struct{}
}

// ProcCluster is a set of kvd processes forming one cluster.
type ProcCluster struct {
	Procs []*Proc
}

// ProcOptions shape a process cluster.
type ProcOptions struct {
	// Transport is passed as --transport (default tcp).
	Transport string
	// Host is the address nodes listen on. Default 127.0.0.1, with ports
	// probed free; any other host (an RDMA device's address) gets ports from
	// BasePort up.
	Host string
	// BasePort numbers the ports on a non-default Host. Default 7471.
	BasePort int
	// Extra flags for every node.
	Extra []string
	// PerNode, if set, gives node id (1..n) flags of its own, after Extra.
	PerNode func(id uint64) []string
}

// StartProcCluster starts n kvd processes from bin over TCP with fault
// injection enabled, and kills them at the end of the test.
func StartProcCluster(t testing.TB, bin string, n int, extra ...string) *ProcCluster {
	t.Helper()
	return StartProcClusterOpts(t, bin, n, ProcOptions{Extra: extra})
}

// StartProcClusterOpts is StartProcCluster with options.
func StartProcClusterOpts(t testing.TB, bin string, n int, o ProcOptions) *ProcCluster {
	t.Helper()
	if o.Transport == "" {
		o.Transport = "tcp"
	}
	addrs := FreeAddrs(t, 2*n) // the metrics listeners are always TCP on loopback
	listen := addrs[:n]
	if o.Host != "" && o.Host != "127.0.0.1" {
		if o.BasePort == 0 {
			o.BasePort = 7471
		}
		listen = make([]string, n)
		for i := range listen {
			listen[i] = fmt.Sprintf("%s:%d", o.Host, o.BasePort+i)
		}
	}
	var cluster []string
	for i := 0; i < n; i++ {
		cluster = append(cluster, fmt.Sprintf("%d=%s", i+1, listen[i]))
	}
	pc := &ProcCluster{}
	for i := 0; i < n; i++ {
		p := &Proc{ID: uint64(i + 1), Addr: listen[i], MetricsAddr: addrs[n+i], DataDir: t.TempDir(), bin: bin}
		p.args = append([]string{
			"--id", fmt.Sprint(i + 1), "--listen", p.Addr, "--initial-cluster", strings.Join(cluster, ","),
			"--data-dir", p.DataDir, "--metrics-listen", p.MetricsAddr, "--transport", o.Transport,
			"--log-level", "warn",
		}, o.Extra...)
		if o.PerNode != nil {
			p.args = append(p.args, o.PerNode(p.ID)...)
		}
		if o.Transport == "tcp" {
			p.args = append(p.args, "--enable-fault-injection")
		}
		pc.Procs = append(pc.Procs, p)
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, p := range pc.Procs {
			p.Kill()
		}
	})
	return pc
}

// Join prepares (but does not start) node id as a new member that joins the
// running cluster with --join; add it with "member add" first.
func (pc *ProcCluster) Join(t testing.TB, id uint64) *Proc {
	t.Helper()
	addrs := FreeAddrs(t, 2)
	var cluster []string
	for _, p := range pc.Procs {
		cluster = append(cluster, fmt.Sprintf("%d=%s", p.ID, p.Addr))
	}
	cluster = append(cluster, fmt.Sprintf("%d=%s", id, addrs[0]))
	p := &Proc{ID: id, Addr: addrs[0], MetricsAddr: addrs[1], DataDir: t.TempDir(), bin: pc.Procs[0].bin}
	p.args = []string{
		"--id", fmt.Sprint(id), "--listen", p.Addr, "--initial-cluster", strings.Join(cluster, ","), "--join",
		"--data-dir", p.DataDir, "--metrics-listen", p.MetricsAddr, "--enable-fault-injection", "--log-level", "warn",
	}
	pc.Procs = append(pc.Procs, p)
	t.Cleanup(p.Kill)
	return p
}

// Endpoints lists the cluster's client addresses.
func (pc *ProcCluster) Endpoints() []string {
	out := make([]string, len(pc.Procs))
	for i, p := range pc.Procs {
		out[i] = p.Addr
	}
	return out
}

// Start starts (or restarts) the process with its data directory.
func (p *Proc) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		return fmt.Errorf("node %d is already running", p.ID)
	}
	cmd := exec.Command(filepath.Join(p.bin, "kvd"), p.args...)
	logs := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = logs, &lockedWriter{w: logs, mu: &p.mu}
	cmd.Stdout = cmd.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	p.cmd, p.logs, p.done = cmd, logs, done
	return nil
}

// Kill sends SIGKILL and waits for the process to die. No-op if it is not
// running.
func (p *Proc) Kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// Running reports whether the process was started and not killed.
func (p *Proc) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil
}

// Logs returns what the process has printed so far.
func (p *Proc) Logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.logs == nil {
		return ""
	}
	return p.logs.String()
}

// Partition makes p drop all traffic (messages and one-sided READs) to and
// from the given peers' addresses; Heal undoes it.
func (p *Proc) Partition(peers ...string) error {
	return p.fault("drop=" + strings.Join(peers, ","))
}

// Heal removes every partition p was told about.
func (p *Proc) Heal() error { return p.fault("drop=") }

func (p *Proc) fault(query string) error {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Post("http://"+p.MetricsAddr+"/debug/faults?"+query, "text/plain", nil)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("fault injection on node %d: %s", p.ID, resp.Status)
	}
	return nil
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// TempBin builds the binaries once into a temporary directory for a test
// binary's TestMain, and returns it with a cleanup function. If
// KVD_TEST_BIN names a directory, its prebuilt kvd and kvctl are used
// instead (inside the RDMA VM, which has no Go toolchain).
func TempBin(tags ...string) (string, func(), error) {
	if dir := os.Getenv("KVD_TEST_BIN"); dir != "" {
		return dir, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "kvd-bin-")
	if err != nil {
		return "", nil, err
	}
	if _, err := Build(dir, tags...); err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	return dir, func() { os.RemoveAll(dir) }, nil
}
