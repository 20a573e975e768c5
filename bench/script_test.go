package bench

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvd-project/kvd/bench/latency"
	"github.com/kvd-project/kvd/bench/result"
)

// Stand-ins for bench.sh's tools. go puts the kvbench stand-in (and empty
// kvd, kvctl) into its -o directory, and fails a -tags rdma build when
// asked to, as it does without libibverbs' headers.
const (
	fakeGo = `#!/bin/sh
out= prev= rdma=
for a in "$@"; do
	[ "$prev" = -o ] && out=$a
	[ "$prev" = -tags ] && [ "$a" = rdma ] && rdma=1
	prev=$a
done
if [ -n "$rdma" ] && [ "$FAKE_RDMA_BUILD" = fail ]; then
	echo "fatal error: infiniband/verbs.h: No such file or directory" >&2
	exit 1
fi
mkdir -p "$out" && cp "$FAKE_KVBENCH" "$out/kvbench" && : >"$out/kvd" && : >"$out/kvctl"
`
	// kvbench run writes a canned one-run report of its --series; kvbench
	// report is the real one.
	fakeKvbench = `#!/bin/sh
cmd=$1
shift
case $cmd in
run)
	json= series=tcp
	while [ $# -gt 0 ]; do
		case $1 in
		--json) json=$2; shift ;;
		--series) series=$2; shift ;;
		esac
		shift
	done
	echo "run $series" >>"$FAKE_LOG"
	sed "s/SERIES/$series/g" "$FAKE_TEMPLATE" >"$json"
	;;
report) exec "$REAL_KVBENCH" report "$@" ;;
writepath)
	echo "writepath $*" >>"$FAKE_LOG"
	out=
	while [ $# -gt 0 ]; do
		[ "$1" = --out ] && out=$2
		shift
	done
	[ -z "$FAKE_WRITEPATH_FAIL" ] || exit 1
	mkdir -p "$out" && echo "writepath: canned" >"$out/writepath.md" && echo "{}" >"$out/writepath.json"
	;;
redis)
	out=
	while [ $# -gt 0 ]; do
		[ "$1" = --out ] && out=$2
		shift
	done
	echo "redis" >>"$FAKE_LOG"
	[ -z "$FAKE_REDIS_FAIL" ] || exit 1
	mkdir -p "$out" && echo "redis: canned" >"$out/redis.md" && : >"$out/redis.csv"
	;;
*) exit 2 ;;
esac
`
	fakeDeps = `#!/bin/sh
[ "${FAKE_DEPS_RC:-0}" = 0 ] || echo "rdmavm: need root to install: libibverbs-dev" >&2
exit "${FAKE_DEPS_RC:-0}"
`
	fakeRun = `#!/bin/sh
[ -n "$FAKE_CONSOLE" ] && cat "$FAKE_CONSOLE"
exit "${FAKE_VM_RC:-0}"
`
)

// benchRun is one report of a single run, as kvbench prints it.
func benchRun(series, transport string) *result.Report {
	return &result.Report{
		Schema: result.SchemaVersion,
		Meta:   []result.Meta{{Series: series, Host: "test", CPUs: 1, Started: time.Unix(0, 0)}},
		Runs: []result.Run{{
			Series: series, Transport: transport, Mix: "100/0", ReadPct: 100, Consistency: "linearizable", Dist: "uniform",
			Keys: 10, KeySize: 16, ValueSize: 256, Mode: "closed", Clients: 1, Conns: 1, Seconds: 1, Ops: 100, Gets: 100,
			Throughput: 100, ClientGets: 100, OneSidedRounds: 100, OneSidedReads: 400, OneSidedBytes: 40000,
			Lat: latency.Summary{Count: 100, P50: 10, P99: 20}, GetLat: latency.Summary{Count: 100, P50: 10, P99: 20},
		}},
	}
}

func writeExec(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
}

// console writes a VM console log holding marked reports of the series.
func console(t *testing.T, path string, series ...string) {
	t.Helper()
	consoleEnding(t, path, "rdmavm-bench: done, rc 0 (12:00:00)\r\nRDMAVM-VERDICT: PASS 0123456789abcdef\r\n", series...)
}

// consoleEnding writes a console like console's, ending with end.
func consoleEnding(t *testing.T, path, end string, series ...string) {
	t.Helper()
	var b bytes.Buffer
	b.WriteString("RDMAVM-READY: kernel test\n")
	for _, s := range series {
		tr := "tcp"
		if strings.Contains(s, "rdma") {
			tr = "rdma"
		}
		if err := result.WriteMarked(&b, benchRun(s, tr)); err != nil {
			t.Fatal(err)
		}
	}
	b.WriteString(end)
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestBenchScript runs bench/bench.sh with stand-ins for go, kvbench's
// sweeps and the RDMA VM: with BENCH_RDMA=1 it must exit non-zero and
// leave the results directory alone whenever a transport's series is
// missing (packages not installable, the rdma build failing, the VM run
// failing or printing only some series), and write it only when every
// series is there.
func TestBenchScript(t *testing.T) {
	if testing.Short() {
		t.Skip("builds kvbench")
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	dir := t.TempDir()
	realKvbench := filepath.Join(dir, "kvbench-real")
	if out, err := exec.Command("go", "build", "-o", realKvbench, "../cmd/kvbench").CombinedOutput(); err != nil {
		t.Fatalf("building kvbench: %v\n%s", err, out)
	}
	vmdir := filepath.Join(dir, "rdmavm")
	if err := os.Mkdir(vmdir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeExec(t, filepath.Join(dir, "go"), fakeGo)
	writeExec(t, filepath.Join(dir, "kvbench"), fakeKvbench)
	baselineBin := filepath.Join(dir, "baseline")
	if err := os.Mkdir(baselineBin, 0o755); err != nil {
		t.Fatal(err)
	}
	writeExec(t, filepath.Join(baselineBin, "kvd"), "")
	writeExec(t, filepath.Join(vmdir, "deps.sh"), fakeDeps)
	writeExec(t, filepath.Join(vmdir, "run.sh"), fakeRun)
	var tmpl bytes.Buffer
	if err := result.WriteJSON(&tmpl, benchRun("SERIES", "tcp")); err != nil {
		t.Fatal(err)
	}
	template := filepath.Join(dir, "template.json")
	if err := os.WriteFile(template, tmpl.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	vmSeries := []string{"vm-rdma", "vm-tcp", "vm-rdma-64inst", "vm-tcp-64inst"}
	full, tcpOnly, empty := filepath.Join(dir, "full.log"), filepath.Join(dir, "tcp-only.log"), filepath.Join(dir, "empty.log")
	console(t, full, vmSeries...)
	console(t, tcpOnly, "vm-tcp", "vm-tcp-64inst")
	console(t, empty)
	// Every series printed, but the VM run failed (a step's rc 1), or gave
	// no verdict at all.
	failedRun, noVerdict := filepath.Join(dir, "failed.log"), filepath.Join(dir, "no-verdict.log")
	consoleEnding(t, failedRun, "rdmavm-bench: done, rc 1 (12:00:00)\nRDMAVM-VERDICT: FAIL 0123456789abcdef\n", vmSeries...)
	consoleEnding(t, noVerdict, "rdmavm-bench: done, rc 0 (12:00:00)\n", vmSeries...)

	for _, tc := range []struct {
		name     string
		env      []string
		ok       bool
		sweeps   bool   // the host sweeps ran
		stderr   string // in the script's stderr
		hasVM    bool   // results.md has the RDMA series
		noBuilds bool
		logHas   string // in the stand-in kvbench's log of what ran
	}{
		{name: "packages cannot be installed", env: []string{"BENCH_RDMA=1", "FAKE_DEPS_RC=1"}, stderr: "deps.sh failed"},
		{name: "rdma build fails", env: []string{"BENCH_RDMA=1", "FAKE_RDMA_BUILD=fail"}, stderr: "-tags rdma build failed"},
		{name: "VM gives no verdict", env: []string{"BENCH_RDMA=1", "FAKE_VM_RC=3", "FAKE_CONSOLE=" + empty}, sweeps: true,
			stderr: "rdma-vm"},
		{name: "VM step failed after the TCP series", env: []string{"BENCH_RDMA=1", "FAKE_VM_RC=1", "FAKE_CONSOLE=" + tcpOnly},
			sweeps: true, stderr: "rdma-vm"},
		{name: "VM passed without the RDMA series", env: []string{"BENCH_RDMA=1", "FAKE_CONSOLE=" + tcpOnly}, sweeps: true,
			stderr: "no runs of vm-rdma, vm-rdma-64inst"},
		{name: "console without reports", env: []string{"BENCH_RDMA_CONSOLE=" + empty}, stderr: "holds no kvbench report"},
		{name: "console missing the RDMA series", env: []string{"BENCH_RDMA_CONSOLE=" + tcpOnly}, sweeps: true,
			stderr: "no runs of vm-rdma"},
		{name: "console of a failed VM run", env: []string{"BENCH_RDMA_CONSOLE=" + failedRun},
			stderr: "not the console of a passing VM run"},
		{name: "console without a verdict", env: []string{"BENCH_RDMA_CONSOLE=" + noVerdict},
			stderr: "not the console of a passing VM run"},
		{name: "complete", env: []string{"BENCH_RDMA=1", "FAKE_CONSOLE=" + full}, ok: true, sweeps: true, hasVM: true},
		{name: "complete from a console", env: []string{"BENCH_RDMA_CONSOLE=" + full}, ok: true, sweeps: true, hasVM: true},
		{name: "TCP only, asked for", env: []string{"BENCH_RDMA=0"}, ok: true, sweeps: true},
		{name: "Redis series fails", env: []string{"BENCH_RDMA=0", "FAKE_REDIS_FAIL=1"}, sweeps: true, stderr: "these parts failed: redis"},
		{name: "write path fails", env: []string{"BENCH_RDMA=0", "FAKE_WRITEPATH_FAIL=1"}, sweeps: true,
			stderr: "these parts failed: writepath"},
		{name: "write path with the baseline built from a revision", env: []string{"BENCH_RDMA=0", "BENCH_BASELINE_REV=HEAD"},
			ok: true, sweeps: true, stderr: "building the baseline kvd from HEAD", logHas: "/baseline-bin --out"},
		{name: "write path with a baseline directory", env: []string{"BENCH_RDMA=0", "BENCH_BASELINE_BIN=" + baselineBin},
			ok: true, sweeps: true, logHas: "--baseline-bin " + baselineBin + " --out"},
		{name: "baseline directory without kvd", env: []string{"BENCH_RDMA=0", "BENCH_BASELINE_BIN=" + vmdir},
			stderr: "holds no kvd"},
		{name: "baseline revision that does not exist", env: []string{"BENCH_RDMA=0", "BENCH_BASELINE_REV=no-such-rev"},
			stderr: "cannot build kvd at BENCH_BASELINE_REV=no-such-rev"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			td := t.TempDir()
			out, logf := filepath.Join(td, "results"), filepath.Join(td, "kvbench.log")
			if err := os.Mkdir(out, 0o755); err != nil {
				t.Fatal(err)
			}
			old := []byte("previous complete results\n")
			if err := os.WriteFile(filepath.Join(out, "results.md"), old, 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(bash, "bench.sh")
			cmd.Env = append(os.Environ(), "QUICK=1", "GO="+filepath.Join(dir, "go"), "BENCH_RDMAVM_DIR="+vmdir,
				"BIN="+filepath.Join(td, "bin"), "OUT="+out, "TMPDIR="+td, "FAKE_KVBENCH="+filepath.Join(dir, "kvbench"),
				"REAL_KVBENCH="+realKvbench, "FAKE_TEMPLATE="+template, "FAKE_LOG="+logf,
				"BENCH_RDMA=", "BENCH_RDMA_CONSOLE=", "FAKE_DEPS_RC=", "FAKE_RDMA_BUILD=", "FAKE_VM_RC=", "FAKE_CONSOLE=", "FAKE_REDIS_FAIL=",
				"FAKE_WRITEPATH_FAIL=", "BENCH_BASELINE_BIN=", "BENCH_BASELINE_REV=", "BENCH_WRITEPATH_ROUNDS=",
				"KVBENCH_PLOTS=")
			cmd.Env = append(cmd.Env, tc.env...)
			var stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = nil, &stderr
			err := cmd.Run()
			if (err == nil) != tc.ok {
				t.Fatalf("bench.sh: %v, want success %v; stderr:\n%s", err, tc.ok, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.stderr) {
				t.Errorf("stderr lacks %q:\n%s", tc.stderr, stderr.String())
			}
			ran, _ := os.ReadFile(logf)
			if got := len(ran) > 0; got != tc.sweeps {
				t.Errorf("host sweeps ran: %v, want %v (%q)", got, tc.sweeps, ran)
			}
			if !strings.Contains(string(ran), tc.logHas) {
				t.Errorf("kvbench's log lacks %q:\n%s", tc.logHas, ran)
			}
			md, err := os.ReadFile(filepath.Join(out, "results.md"))
			if err != nil {
				t.Fatal(err)
			}
			if !tc.ok {
				if !bytes.Equal(md, old) {
					t.Errorf("a failed run replaced results.md:\n%s", md)
				}
				if !strings.Contains(stderr.String(), "was left as it was") {
					t.Errorf("stderr does not say the results were kept:\n%s", stderr.String())
				}
				return
			}
			if wp, err := os.ReadFile(filepath.Join(out, "writepath.md")); err != nil || string(wp) != "writepath: canned\n" {
				t.Errorf("results lack the write path: %q, %v", wp, err)
			}
			if _, err := os.Stat(filepath.Join(out, "writepath.json")); err != nil {
				t.Errorf("results lack writepath.json: %v", err)
			}
			if !strings.Contains(string(ran), "writepath --bin "+filepath.Join(td, "bin")+" --rounds 3 --duration 2s") {
				t.Errorf("the write path ran otherwise than QUICK says:\n%s", ran)
			}
			if rd, err := os.ReadFile(filepath.Join(out, "redis.md")); err != nil || string(rd) != "redis: canned\n" {
				t.Errorf("results lack the Redis series: %q, %v", rd, err)
			}
			for _, s := range []string{"| tcp |", "| tcp-64inst |", "| tcp+tls |"} {
				if !bytes.Contains(md, []byte(s)) {
					t.Errorf("results.md lacks %q:\n%s", s, md)
				}
			}
			if got := bytes.Contains(md, []byte("| vm-rdma |")) && bytes.Contains(md, []byte("| vm-rdma-64inst |")); got != tc.hasVM {
				t.Errorf("results.md has the RDMA series: %v, want %v", got, tc.hasVM)
			}
		})
	}
}
