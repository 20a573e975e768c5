package procstat

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	for _, tc := range []struct {
		name         string
		in           string
		utime, stime uint64
		ok           bool
	}{
		{"plain", "4242 (kvd) S 1 4242 4242 0 -1 4194560 1520 0 0 0 731 129 0 0 20 0 12 0 9912 2000 300", 731, 129, true},
		{"name with spaces and parens", "17 (a (b) c) R 1 17 17 0 -1 0 0 0 0 0 5 6 0 0 20 0", 5, 6, true},
		{"trailing newline", "1 (init) S 0 1 1 0 -1 0 0 0 0 0 99 1 0 0 20 0\n", 99, 1, true},
		{"no name", "1 init S 0 1 1 0 -1 0 0 0 0 0 99 1", 0, 0, false},
		{"truncated", "1 (x) S 0 1 1 0 -1 0 0 0 0 0 99", 0, 0, false},
		{"not a number", "1 (x) S 0 1 1 0 -1 0 0 0 0 0 ab 1 0", 0, 0, false},
	} {
		u, s, err := ParseStat([]byte(tc.in))
		if (err == nil) != tc.ok || u != tc.utime || s != tc.stime {
			t.Errorf("%s: got %d, %d, %v; want %d, %d ok=%v", tc.name, u, s, err, tc.utime, tc.stime, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrFormat) {
			t.Errorf("%s: %v does not wrap ErrFormat", tc.name, err)
		}
	}
}

func auxv(pairs ...uint64) []byte {
	b := make([]byte, 8*len(pairs))
	for i, v := range pairs {
		binary.NativeEndian.PutUint64(b[8*i:], v)
	}
	return b
}

func TestParseAuxvTicks(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		want int
		ok   bool
	}{
		{"present", auxv(6, 4096, 17, 250, 0, 0), 250, true},
		{"after terminator", auxv(6, 4096, 0, 0, 17, 250), 0, false},
		{"absent", auxv(6, 4096, 0, 0), 0, false},
		{"empty", nil, 0, false},
	} {
		got, ok := parseAuxvTicks(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: got %d, %v", tc.name, got, ok)
		}
	}
}

func TestTicksToDuration(t *testing.T) {
	if d := ticksToDuration(250, 100); d != 2500*time.Millisecond {
		t.Errorf("250 ticks at 100 Hz = %v", d)
	}
	if d := ticksToDuration(3, 1000); d != 3*time.Millisecond {
		t.Errorf("3 ticks at 1000 Hz = %v", d)
	}
}

// TestCPUOfSelf: this process's CPU time grows when it burns CPU.
func TestCPUOfSelf(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	if hz := TicksPerSecond(); hz <= 0 {
		t.Fatalf("TicksPerSecond = %d", hz)
	}
	pid := os.Getpid()
	before, err := Total([]int{pid})
	if err != nil {
		t.Fatal(err)
	}
	x := uint64(1)
	deadline := before + 100*time.Millisecond
	for i := 0; ; i++ {
		for range 1 << 20 {
			x = x*6364136223846793005 + 1
		}
		now, err := CPU(pid)
		if err != nil {
			t.Fatal(err)
		}
		if now >= deadline {
			break
		}
		if i > 1e5 {
			t.Fatalf("CPU time stuck at %v after burning: %d", now, x)
		}
	}
}

func TestMissingProcess(t *testing.T) {
	if _, err := Total([]int{os.Getpid(), 1 << 30}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Total with a missing pid: %v", err)
	}
}

// TestLoadAvgIsThreeNumbers: the 1, 5 and 15 minute averages, as a report
// shows them.
func TestLoadAvgIsThreeNumbers(t *testing.T) {
	if _, err := os.Stat("/proc/loadavg"); err != nil {
		t.Skip("no /proc")
	}
	f := strings.Fields(LoadAvg())
	if len(f) != 3 {
		t.Fatalf("LoadAvg() = %q, want three fields", LoadAvg())
	}
	for _, v := range f {
		if _, err := strconv.ParseFloat(v, 64); err != nil {
			t.Errorf("LoadAvg() field %q is not a number", v)
		}
	}
}
