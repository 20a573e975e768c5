package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvd-project/kvd/bench/latency"
	"github.com/kvd-project/kvd/bench/result"
	"github.com/kvd-project/kvd/bench/writepath"
)

// fakeBin is a directory holding a file named kvd.
func fakeBin(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "kvd"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestWritepathPoints: the floors, a kvd point per --raft-logs value and
// the baseline, each in its role; settings that cannot run are refused as
// usage errors before anything starts.
func TestWritepathPoints(t *testing.T) {
	bin, base := fakeBin(t), fakeBin(t)
	for _, tc := range []struct {
		name   string
		args   []string
		points string // name:role, space-separated
		bad    string // in the usage error
	}{
		{"defaults", []string{"--bin", bin}, "floor:floor floor-pebble:reference floor-state:reference kvd-pebble:candidate kvd-wal:candidate", ""},
		{"with a baseline", []string{"--bin", bin, "--baseline-bin", base, "--raft-logs", "wal"},
			"floor:floor floor-pebble:reference floor-state:reference kvd-wal:candidate baseline:baseline", ""},
		{"floors alone", []string{"--bin", bin, "--raft-logs", ""}, "floor:floor floor-pebble:reference floor-state:reference", ""},
		{"one client", []string{"--bin", bin, "--clients", "1"}, "", "--clients 1"},
		{"no kvd", []string{"--bin", t.TempDir()}, "", "no kvd binary"},
		{"no baseline kvd", []string{"--bin", bin, "--baseline-bin", t.TempDir()}, "", "no kvd binary"},
		{"a Raft log twice", []string{"--bin", bin, "--raft-logs", "wal,wal"}, "", `"kvd-wal" twice`},
		{"value too large for the floor", []string{"--bin", bin, "--value-size", "64MiB"}, "", "request of"},
		{"no measured time", []string{"--bin", bin, "--duration", "0s"}, "", "duration"},
		{"negative rounds", []string{"--bin", bin, "--rounds", "-1"}, "", "rounds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parseWritepath(tc.args)
			var cfg writepath.Config
			if err == nil {
				cfg, err = o.config()
			}
			if tc.bad != "" {
				if !errors.As(err, new(usageError)) || !strings.Contains(err.Error(), tc.bad) {
					t.Errorf("%v, want a usage error naming %q", err, tc.bad)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range cfg.Points {
				got = append(got, p.Name+":"+string(p.Role))
			}
			if strings.Join(got, " ") != tc.points {
				t.Errorf("points %q, want %q", got, tc.points)
			}
		})
	}
}

// TestKvdMeasurementTakesBothRuns: CPU and throughput from the
// many-client run, p50 from the one-client run; either missing fails.
func TestKvdMeasurementTakesBothRuns(t *testing.T) {
	many := result.Run{Clients: 64, Throughput: 7500, ServerCPUPerOp: 168, PutLat: latency.Summary{P50: 8000}}
	one := result.Run{Clients: 1, Throughput: 700, ServerCPUPerOp: 900, PutLat: latency.Summary{P50: 1276}}
	m, err := kvdMeasurement(&result.Report{Runs: []result.Run{many, one}}, 64)
	if err != nil || m != (writepath.Measurement{CPUPerPut: 168, PutsPerSec: 7500, P50: 1276}) {
		t.Errorf("%+v, %v", m, err)
	}
	for _, runs := range [][]result.Run{{many}, {one}, nil} {
		if _, err := kvdMeasurement(&result.Report{Runs: runs}, 64); err == nil {
			t.Errorf("runs %+v: no error", runs)
		}
	}
}
