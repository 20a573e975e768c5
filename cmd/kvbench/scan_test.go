package main

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/kvd-project/kvd/bench/result"
	"github.com/kvd-project/kvd/internal/kvdtest"
)

// TestEndToEndScan runs the YCSB-E workload (--mix scan) against a real
// one-node cluster: scans through Client.Range return at most
// --scan-length keys each, inserts land, nothing fails.
func TestEndToEndScan(t *testing.T) {
	if testing.Short() {
		t.Skip("builds kvd and starts a cluster")
	}
	bin, err := kvdtest.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err = runCmd(ctx, []string{"--start-cluster", "1", "--bin", bin, "--table-mem", "32MiB", "--mix", "scan", "--scan-length", "5",
		"--consistency", "linearizable", "--clients", "2", "--keys", "200", "--duration", "1s", "--warmup", "0s", "--settle", "0s",
		"--idle", "100ms", "--baseline=false", "--out", out, "--plots", "", "-w", "none", "--quiet"})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := result.ReadFile(filepath.Join(out, jsonFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != 1 {
		t.Fatalf("%d runs", len(rep.Runs))
	}
	r := rep.Runs[0]
	if r.Mix != "scan" || r.Scans == 0 || r.Puts == 0 || r.Errors != 0 {
		t.Fatalf("scan run: mix %q, %d scans, %d inserts, %d errors", r.Mix, r.Scans, r.Puts, r.Errors)
	}
	// Uniform in 1..5 (a scan near the end of the keys may return fewer).
	if per := float64(r.ScanKeys) / float64(r.Scans); per < 1 || per > 5 {
		t.Fatalf("%.2f keys per scan, want within 1..5", per)
	}
}
