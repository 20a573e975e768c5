package etcdseries

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/kvd-project/kvd/internal/errs"
)

// ErrConfig: the Config is unusable.
var ErrConfig = errs.ErrConfig

// Target is a cluster the tool is pointed at.
type Target struct {
	Name      string   `json:"name"` // "etcd", "kvd nodes", "kvd gateway"
	Endpoints []string `json:"endpoints"`
}

// Config is one run of the series.
type Config struct {
	// Benchmark is the path of etcd's benchmark tool. Required.
	Benchmark string
	// Targets are measured in turn at every point; the first is the
	// reference the ratios divide by (etcd). At least two.
	Targets []Target
	// Rounds is how many times every point is measured on every target;
	// the table gives the medians. Default 5.
	Rounds int
	// Clients are the client counts of every workload but the watch.
	// Default 1 and 64.
	Clients []int
	// Scale multiplies every request total (0.1 for a smoke run).
	// Default 1.
	Scale float64
	// WatchPuts is the watch-latency point's puts (at 100/s). Default 200.
	WatchPuts int
	// Log receives a line per measurement. Default: discarded.
	Log io.Writer
	// Knobs are for tests.
	Knobs Knobs
}

// Knobs let tests stand in for the tool.
type Knobs struct {
	// Exec runs the tool and returns its stdout; nil: the real process.
	Exec func(ctx context.Context, bin string, args []string) ([]byte, error)
}

// Defaults.
const (
	DefaultRounds    = 5
	DefaultWatchPuts = 200
)

// DefaultClients are the client counts of the goals: one client and 64.
func DefaultClients() []int { return []int{1, 64} }

func (c Config) withDefaults() Config {
	if c.Rounds == 0 {
		c.Rounds = DefaultRounds
	}
	if len(c.Clients) == 0 {
		c.Clients = DefaultClients()
	}
	if c.Scale == 0 {
		c.Scale = 1
	}
	if c.WatchPuts == 0 {
		c.WatchPuts = DefaultWatchPuts
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	return c
}

// Validate reports whether c is usable; c is not changed.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Benchmark == "":
		return fmt.Errorf("%w: no benchmark tool", ErrConfig)
	case len(c.Targets) < 2:
		return fmt.Errorf("%w: %d targets, need the reference and at least one more", ErrConfig, len(c.Targets))
	case c.Rounds < 1:
		return fmt.Errorf("%w: %d rounds", ErrConfig, c.Rounds)
	case c.Scale < 0 || c.WatchPuts < 1:
		return fmt.Errorf("%w: scale %v, watch puts %d", ErrConfig, c.Scale, c.WatchPuts)
	}
	for _, n := range c.Clients {
		if n < 1 {
			return fmt.Errorf("%w: %d clients", ErrConfig, n)
		}
	}
	for _, t := range c.Targets {
		if t.Name == "" || len(t.Endpoints) == 0 {
			return fmt.Errorf("%w: target %q without a name or endpoints", ErrConfig, t.Name)
		}
	}
	return nil
}

// Measurement is one run of the tool.
type Measurement struct {
	Point   int    `json:"point"` // index into Result.Points
	Target  string `json:"target"`
	Round   int    `json:"round"`
	Summary `json:"summary"`
	Err     string `json:"error,omitempty"` // the run failed: no numbers
}

// Result is a run of the series.
type Result struct {
	Points       []Point       `json:"points"`
	Targets      []Target      `json:"targets"`
	Rounds       int           `json:"rounds"`
	Measurements []Measurement `json:"measurements"`
	Started      time.Time     `json:"started"`
	Elapsed      float64       `json:"elapsed_seconds"`
}

// Run measures every point on every target, Rounds times: round r starts
// each point at target r (mod the number of targets) so that no target
// always runs first or last. A failed measurement is kept (with its
// error) and the run goes on; Run then returns the result and an error
// naming the failures.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	tool := cfg.Knobs.Exec
	if tool == nil {
		tool = runTool
	}
	res := &Result{Points: Plan(cfg), Targets: cfg.Targets, Rounds: cfg.Rounds, Started: time.Now().UTC()}
	var failed []string
	for r := range cfg.Rounds {
		for pi, p := range res.Points {
			for k := range cfg.Targets {
				if err := ctx.Err(); err != nil {
					return res, err
				}
				tg := cfg.Targets[(k+r)%len(cfg.Targets)]
				m := measure(ctx, tool, cfg.Benchmark, p, tg)
				m.Point, m.Round = pi, r+1
				res.Measurements = append(res.Measurements, m)
				fmt.Fprintf(cfg.Log, "etcdseries: round %d %s %d clients %s: %s\n", r+1, p.Name, p.Clients, tg.Name, describe(m, p))
				if m.Err != "" {
					failed = append(failed, fmt.Sprintf("round %d %s/%d on %s", r+1, p.Name, p.Clients, tg.Name))
				}
			}
		}
	}
	res.Elapsed = time.Since(res.Started).Seconds()
	if len(failed) > 0 {
		return res, fmt.Errorf("etcdseries: %d measurements failed: %s", len(failed), strings.Join(failed, ", "))
	}
	return res, nil
}

// measure runs p once against tg.
func measure(ctx context.Context, tool func(context.Context, string, []string) ([]byte, error), bin string, p Point, tg Target) Measurement {
	args := append([]string{"--endpoints", strings.Join(tg.Endpoints, ","), "--clients", strconv.Itoa(p.Clients),
		"--conns", strconv.Itoa(p.Conns), "--precise"}, p.Args...)
	m := Measurement{Target: tg.Name}
	out, err := tool(ctx, bin, args)
	if err != nil {
		m.Err = err.Error()
		return m
	}
	o, err := Parse(bytes.NewReader(out))
	if err != nil {
		m.Err = err.Error()
		return m
	}
	s, ok := o[p.Report]
	if !ok {
		m.Err = fmt.Sprintf("no %q report in the output", p.Report)
		return m
	}
	for title, other := range o {
		if title != p.Report && other.Errors > 0 {
			s.Errors += other.Errors
			if s.ErrorText == nil {
				s.ErrorText = map[string]int{}
			}
			for msg, n := range other.ErrorText {
				s.ErrorText[title+": "+msg] += n
			}
		}
	}
	m.Summary = s
	return m
}

func describe(m Measurement, p Point) string {
	if m.Err != "" {
		return "FAILED: " + m.Err
	}
	s := fmt.Sprintf("%.0f ops/s, p50 %.3f ms, p99 %.3f ms, %d failed requests", m.PerSecond, m.Percentile["50"]*1e3, m.Percentile["99"]*1e3, m.Errors)
	if m.Errors > 0 {
		s += fmt.Sprintf(" %v", m.ErrorText)
	}
	return s
}

// runTool runs the real tool; its progress bar (stderr) is dropped but
// for the end of a failure's.
func runTool(ctx context.Context, bin string, args []string) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s %s: %w: %s", bin, strings.Join(args, " "), err, lastLines(stderr.String(), 5))
	}
	return stdout.Bytes(), nil
}

// lastLines are the last n lines of the tool's stderr, without its
// progress bar (redrawn with carriage returns, "... 12.00% 345 p/s").
func lastLines(s string, n int) string {
	var keep []string
	for _, l := range strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' }) {
		if l = strings.TrimSpace(l); l != "" && !strings.HasSuffix(l, " p/s") && !strings.HasSuffix(l, "? p/s") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep[max(0, len(keep)-n):], "\n")
}
