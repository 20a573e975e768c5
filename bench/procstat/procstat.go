package procstat

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ErrFormat: a /proc file did not have the expected shape.
var ErrFormat = errors.New("procstat: unexpected /proc format")

// Fields of /proc/PID/stat counted from the one after the command name
// (field 3, state, is index 0): utime and stime are fields 14 and 15.
const (
	utimeIndex = 11
	stimeIndex = 12
)

// ParseStat returns the user and system CPU time, in clock ticks, from the
// contents of a /proc/PID/stat file. The command name is skipped by its
// last ')' since it may itself contain spaces and parentheses.
func ParseStat(b []byte) (utime, stime uint64, err error) {
	end := bytes.LastIndexByte(b, ')')
	if end < 0 {
		return 0, 0, fmt.Errorf("%w: no command name in stat", ErrFormat)
	}
	fields := bytes.Fields(b[end+1:])
	if len(fields) <= stimeIndex {
		return 0, 0, fmt.Errorf("%w: stat has %d fields after the command", ErrFormat, len(fields))
	}
	if utime, err = strconv.ParseUint(string(fields[utimeIndex]), 10, 64); err != nil {
		return 0, 0, fmt.Errorf("%w: utime %q", ErrFormat, fields[utimeIndex])
	}
	if stime, err = strconv.ParseUint(string(fields[stimeIndex]), 10, 64); err != nil {
		return 0, 0, fmt.Errorf("%w: stime %q", ErrFormat, fields[stimeIndex])
	}
	return utime, stime, nil
}

// atClkTck is the auxiliary vector entry carrying sysconf(_SC_CLK_TCK).
const atClkTck = 17

// parseAuxvTicks finds AT_CLKTCK in a native-endian 64-bit auxiliary vector.
func parseAuxvTicks(b []byte) (int, bool) {
	for i := 0; i+16 <= len(b); i += 16 {
		k, v := binary.NativeEndian.Uint64(b[i:]), binary.NativeEndian.Uint64(b[i+8:])
		if k == 0 {
			break
		}
		if k == atClkTck && v > 0 && v < 1<<20 {
			return int(v), true
		}
	}
	return 0, false
}

// defaultTicks is USER_HZ on every mainstream Linux architecture.
const defaultTicks = 100

var ticks = sync.OnceValue(func() int {
	if b, err := os.ReadFile("/proc/self/auxv"); err == nil {
		if t, ok := parseAuxvTicks(b); ok {
			return t
		}
	}
	return defaultTicks
})

// TicksPerSecond is the clock tick rate /proc counts CPU time in (what
// getconf CLK_TCK prints), read from this process's auxiliary vector.
func TicksPerSecond() int { return ticks() }

// CPU returns the user plus system CPU time process pid has used so far.
// Its resolution is one clock tick (10 ms at the usual 100 Hz), so measure
// over runs long enough to use many ticks.
func CPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	u, s, err := ParseStat(b)
	if err != nil {
		return 0, fmt.Errorf("pid %d: %w", pid, err)
	}
	return ticksToDuration(u+s, TicksPerSecond()), nil
}

func ticksToDuration(t uint64, perSecond int) time.Duration {
	return time.Duration(t) * (time.Second / time.Duration(perSecond))
}

// Total sums CPU over pids. It fails if any process cannot be read: a
// server that died mid-run would otherwise make the run look cheap.
func Total(pids []int) (time.Duration, error) {
	var sum time.Duration
	for _, p := range pids {
		d, err := CPU(p)
		if err != nil {
			return 0, err
		}
		sum += d
	}
	return sum, nil
}

// LoadAvg is /proc/loadavg's first three fields (the 1, 5 and 15 minute
// load averages), for a report to show how busy a shared machine was; ""
// where there is none.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
