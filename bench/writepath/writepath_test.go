package writepath

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fakeRun is what each point measures in each round (from 0), indexed by
// point name; calls records the order Measure was called in.
type fakeRun struct {
	values map[string][]Measurement
	fail   map[string]int // point -> round (from 0) in which it fails
	calls  []string
	round  map[string]int
}

func (f *fakeRun) points(roles ...Role) []Point {
	names := []string{"floor", "floor-pebble", "kvd-pebble", "kvd-wal", "baseline"}
	var out []Point
	for i, role := range roles {
		name := names[i]
		out = append(out, Point{Name: name, Role: role, Detail: "fake " + name, Measure: func(context.Context) (Measurement, error) {
			r := f.round[name]
			f.round[name]++
			f.calls = append(f.calls, name)
			if fr, ok := f.fail[name]; ok && fr == r {
				return Measurement{}, errors.New("cluster did not start")
			}
			return f.values[name][r], nil
		}})
	}
	return out
}

func newFake(values map[string][]Measurement) *fakeRun {
	return &fakeRun{values: values, fail: map[string]int{}, round: map[string]int{}}
}

var allRoles = []Role{Floor, Reference, Candidate, Candidate, Baseline}

// threeRounds: the floor at 40, 42, 50 µs (median 42); kvd-wal at 84 µs
// in every round (2.00× the floor), at twice the baseline's throughput and
// half its p50.
func threeRounds() map[string][]Measurement {
	return map[string][]Measurement{
		"floor":        {{40, 20000, 0}, {42, 21000, 0}, {50, 19000, 0}},
		"floor-pebble": {{80, 13000, 0}, {90, 14000, 0}, {70, 15000, 0}},
		"kvd-pebble":   {{170, 7000, 1300}, {160, 7600, 1200}, {230, 5700, 1250}},
		"kvd-wal":      {{84, 15000, 600}, {84, 14000, 700}, {84, 16000, 650}},
		"baseline":     {{168, 7500, 1300}, {170, 7000, 1400}, {160, 7200, 1350}},
	}
}

func TestOrderRotatesEachRound(t *testing.T) {
	pts := []string{"a", "b", "c", "d"}
	for _, tc := range []struct {
		round int
		want  string
	}{
		{0, "abcd"}, {1, "bcda"}, {2, "cdab"}, {3, "dabc"}, {4, "abcd"}, {6, "cdab"},
	} {
		if got := strings.Join(Order(pts, tc.round), ""); got != tc.want {
			t.Errorf("round %d: %s, want %s", tc.round, got, tc.want)
		}
	}
	if got := Order([]string{}, 3); len(got) != 0 {
		t.Errorf("no points: %v", got)
	}
}

// TestRunRotatesTheOrderEveryRound: every point runs once a round, round r
// starting at point r, and each sample records its round and place.
func TestRunRotatesTheOrderEveryRound(t *testing.T) {
	f := newFake(threeRounds())
	rep, err := Run(context.Background(), Config{Points: f.points(allRoles...), Rounds: 3})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"floor", "floor-pebble", "kvd-pebble", "kvd-wal", "baseline",
		"floor-pebble", "kvd-pebble", "kvd-wal", "baseline", "floor",
		"kvd-pebble", "kvd-wal", "baseline", "floor", "floor-pebble",
	}
	if !slices.Equal(f.calls, want) {
		t.Fatalf("calls %v\nwant %v", f.calls, want)
	}
	if len(rep.Samples) != len(want) {
		t.Fatalf("%d samples, want %d", len(rep.Samples), len(want))
	}
	for i, s := range rep.Samples {
		if s.Point != want[i] || s.Round != i/5+1 || s.Order != i%5+1 {
			t.Errorf("sample %d: %s round %d #%d, want %s round %d #%d", i, s.Point, s.Round, s.Order, want[i], i/5+1, i%5+1)
		}
		if s.Measurement != threeRounds()[s.Point][s.Round-1] {
			t.Errorf("sample %d: %+v, want round %d's values", i, s, s.Round)
		}
	}
	if err := rep.Complete(); err != nil {
		t.Errorf("complete run: %v", err)
	}
	if rep.Meta.Rounds != 3 || rep.Meta.Started.IsZero() || rep.Meta.Finished.Before(rep.Meta.Started) {
		t.Errorf("meta %+v", rep.Meta)
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// TestSummaryTakesMediansAndRatios: each row is the median over the
// rounds (the mean of the middle two for an even count); CPU is divided
// by the floor's median, a candidate's throughput and p50 by the
// baseline's; ratios without meaning for a role, or without a side, are 0.
func TestSummaryTakesMediansAndRatios(t *testing.T) {
	four := threeRounds()
	four["floor"] = append(four["floor"], Measurement{44, 22000, 0}) // median (42+44)/2 = 43
	four["kvd-wal"] = append(four["kvd-wal"], Measurement{86, 17000, 550})
	four["floor-pebble"] = append(four["floor-pebble"], Measurement{75, 14000, 0})
	four["kvd-pebble"] = append(four["kvd-pebble"], Measurement{165, 7100, 1240})
	for _, tc := range []struct {
		name   string
		values map[string][]Measurement
		roles  []Role
		rounds int
		want   map[string]Row
	}{
		{"three rounds", threeRounds(), allRoles, 3, map[string]Row{
			"floor":        {Rounds: 3, Median: Measurement{42, 20000, 0}},
			"floor-pebble": {Rounds: 3, Median: Measurement{80, 14000, 0}, CPUOverFloor: 80.0 / 42},
			"kvd-pebble":   {Rounds: 3, Median: Measurement{170, 7000, 1250}, CPUOverFloor: 170.0 / 42, PutsOverBaseline: 7000.0 / 7200, P50OverBaseline: 1250.0 / 1350},
			"kvd-wal":      {Rounds: 3, Median: Measurement{84, 15000, 650}, CPUOverFloor: 2, PutsOverBaseline: 15000.0 / 7200, P50OverBaseline: 650.0 / 1350},
			"baseline":     {Rounds: 3, Median: Measurement{168, 7200, 1350}, CPUOverFloor: 4},
		}},
		{"four rounds: the middle two's mean", four, []Role{Floor, Reference, Candidate, Candidate}, 4, map[string]Row{
			"floor":   {Rounds: 4, Median: Measurement{43, 20500, 0}},
			"kvd-wal": {Rounds: 4, Median: Measurement{84, 15500, 625}, CPUOverFloor: 84.0 / 43},
		}},
		{"no baseline: no baseline ratios", threeRounds(), []Role{Floor, Reference, Candidate, Candidate}, 3, map[string]Row{
			"kvd-wal": {Rounds: 3, Median: Measurement{84, 15000, 650}, CPUOverFloor: 2},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(tc.values)
			rep, err := Run(context.Background(), Config{Points: f.points(tc.roles...), Rounds: tc.rounds})
			if err != nil {
				t.Fatal(err)
			}
			rows := rep.Summary()
			if len(rows) != len(tc.roles) {
				t.Fatalf("%d rows, want %d", len(rows), len(tc.roles))
			}
			for _, got := range rows {
				want, ok := tc.want[got.Point]
				if !ok {
					continue
				}
				if got.Rounds != want.Rounds || !near(got.Median.CPUPerPut, want.Median.CPUPerPut) ||
					!near(got.Median.PutsPerSec, want.Median.PutsPerSec) || !near(got.Median.P50, want.Median.P50) ||
					!near(got.CPUOverFloor, want.CPUOverFloor) || !near(got.PutsOverBaseline, want.PutsOverBaseline) ||
					!near(got.P50OverBaseline, want.P50OverBaseline) {
					t.Errorf("%s:\n got %+v\nwant %+v", got.Point, got, want)
				}
			}
		})
	}
}

// TestMarkdownShowsMediansRatiosAndRounds: the summary's cells, what each
// point runs, and each round's CPU over that round's floor.
func TestMarkdownShowsMediansRatiosAndRounds(t *testing.T) {
	f := newFake(threeRounds())
	rep, err := Run(context.Background(), Config{Points: f.points(allRoles...), Rounds: 3,
		Meta: Meta{Clients: 64, Keys: 100000, ValueSize: 256, Seconds: 8, WarmupSeconds: 1}})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := rep.WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{
		"64 clients, each with its own connection and one PUT in flight; 100000 keys, 256 B values; 8 s points after 1 s of warm-up",
		"Rounds: 3, the order rotated each round",
		"| floor | 42.0 | – | 20000 | – | – | – |",
		"| floor-pebble | 80.0 | 1.90× | 14000 | – | – | – |",
		"| kvd-wal | 84.0 | 2.00× | 15000 | 2.08× | 650 | 0.48× |",
		"| baseline | 168.0 | 4.00× | 7200 | – | 1350 | – |",
		"- kvd-wal (candidate): fake kvd-wal",
		// Round 3 starts at kvd-pebble; its floor spent 50 µs, its
		// baseline did 7200 PUTs/s at a p50 of 1350 µs.
		"| 3 | 1 | kvd-pebble | 230.0 | 4.60× | 5700 | 0.79× | 1250 | 0.93× |",
		"| 3 | 4 | floor | 50.0 | – | 19000 | – | – | – |",
		"| 3 | 3 | baseline | 160.0 | 3.20× | 7200 | – | 1350 | – |",
		"| 2 | 5 | floor | 42.0 | – | 21000 | – | – | – |",
		"| 2 | 1 | floor-pebble | 90.0 | 2.14× | 14000 | – | – | – |",
		"| 2 | 2 | kvd-pebble | 160.0 | 3.81× | 7600 | 1.09× | 1200 | 0.86× |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "Failed points") {
		t.Errorf("a complete run lists failed points:\n%s", md)
	}
}

// TestFailedPointWritesNoResult: a point that fails (or measures nothing)
// in any round makes the run incomplete, and Save then writes nothing and
// leaves what was there; a complete run writes both files.
func TestFailedPointWritesNoResult(t *testing.T) {
	zeroP50 := threeRounds()
	zeroP50["kvd-wal"][1].P50 = 0
	zeroCPU := threeRounds()
	zeroCPU["floor"][2].CPUPerPut = 0
	for _, tc := range []struct {
		name   string
		values map[string][]Measurement
		fail   map[string]int
		stderr string
	}{
		{"complete", threeRounds(), nil, ""},
		{"a cluster fails in round 2", threeRounds(), map[string]int{"kvd-pebble": 1}, "round 2, kvd-pebble: cluster did not start"},
		{"the floor fails in round 1", threeRounds(), map[string]int{"floor": 0}, "round 1, floor: cluster did not start"},
		{"a kvd point without a p50", zeroP50, nil, "round 2, kvd-wal: no one-client PUT p50"},
		{"a floor without CPU", zeroCPU, nil, "round 3, floor: no server CPU per PUT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(tc.values)
			for k, v := range tc.fail {
				f.fail[k] = v
			}
			var progress bytes.Buffer
			rep, runErr := Run(context.Background(), Config{Points: f.points(allRoles...), Rounds: 3, Progress: &progress})
			if len(f.calls) != 15 {
				t.Errorf("%d points measured, want all 15 despite the failure", len(f.calls))
			}
			dir := t.TempDir()
			old := []byte("the last complete run\n")
			if err := os.WriteFile(filepath.Join(dir, MarkdownFile), old, 0o644); err != nil {
				t.Fatal(err)
			}
			saveErr := rep.Save(dir)
			md, _ := os.ReadFile(filepath.Join(dir, MarkdownFile))
			js, jsErr := os.ReadFile(filepath.Join(dir, JSONFile))
			if tc.stderr == "" {
				if runErr != nil || saveErr != nil {
					t.Fatalf("run: %v, save: %v", runErr, saveErr)
				}
				var got struct {
					Samples []Sample `json:"samples"`
					Summary []Row    `json:"summary"`
				}
				if err := json.Unmarshal(js, &got); err != nil || len(got.Samples) != 15 || len(got.Summary) != 5 {
					t.Errorf("%s: %d samples, %d rows, %v", JSONFile, len(got.Samples), len(got.Summary), err)
				}
				if !bytes.Contains(md, []byte("| kvd-wal | 84.0 | 2.00× |")) {
					t.Errorf("%s not written:\n%s", MarkdownFile, md)
				}
				return
			}
			for name, err := range map[string]error{"Run": runErr, "Save": saveErr} {
				if !errors.Is(err, ErrIncomplete) || !strings.Contains(err.Error(), tc.stderr) {
					t.Errorf("%s: %v, want ErrIncomplete naming %q", name, err, tc.stderr)
				}
			}
			if !bytes.Equal(md, old) || !errors.Is(jsErr, os.ErrNotExist) {
				t.Errorf("an incomplete run wrote results: %s %q, %s %v", MarkdownFile, md, JSONFile, jsErr)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 1 {
				t.Errorf("files left in the results directory: %v", entries)
			}
			if !strings.Contains(progress.String(), "FAILED") {
				t.Errorf("progress does not say a point failed:\n%s", progress.String())
			}
			var b bytes.Buffer
			if err := rep.WriteMarkdown(&b); err != nil || !strings.Contains(b.String(), "Failed points") {
				t.Errorf("the printed report hides the failure (%v):\n%s", err, b.String())
			}
		})
	}
}

// TestSaveRefusesMissingRounds: a report whose samples do not cover every
// round (one assembled by hand, or cut short) is incomplete too.
func TestSaveRefusesMissingRounds(t *testing.T) {
	rep := &Report{Meta: Meta{Rounds: 2}, Points: []PointInfo{{Name: "floor", Role: Floor}},
		Samples: []Sample{{Point: "floor", Round: 1, Order: 1, Measurement: Measurement{40, 20000, 0}}}}
	dir := t.TempDir()
	if err := rep.Save(dir); !errors.Is(err, ErrIncomplete) {
		t.Errorf("Save: %v, want ErrIncomplete", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("written: %v", entries)
	}
}

// TestRunStopsWhenCancelled: a cancelled run returns at once with what it
// measured.
func TestRunStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	f := newFake(threeRounds())
	pts := f.points(allRoles...)
	pts[1].Measure = func(ctx context.Context) (Measurement, error) {
		cancel()
		return Measurement{}, ctx.Err()
	}
	rep, err := Run(ctx, Config{Points: pts, Rounds: 3})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v", err)
	}
	if len(rep.Samples) != 1 || len(f.calls) != 1 {
		t.Errorf("after the cancel: %d samples, %v called", len(rep.Samples), f.calls)
	}
	if rep.Complete() == nil {
		t.Error("a cancelled run is complete")
	}
}

func TestConfigValidate(t *testing.T) {
	m := func(context.Context) (Measurement, error) { return Measurement{}, nil }
	pt := func(name string, role Role) Point { return Point{Name: name, Role: role, Measure: m} }
	for _, tc := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"floor and candidates", Config{Points: []Point{pt("f", Floor), pt("a", Candidate), pt("b", Baseline)}}, true},
		{"no floor", Config{Points: []Point{pt("a", Candidate)}}, false},
		{"two floors", Config{Points: []Point{pt("f", Floor), pt("g", Floor)}}, false},
		{"two baselines", Config{Points: []Point{pt("f", Floor), pt("a", Baseline), pt("b", Baseline)}}, false},
		{"a name twice", Config{Points: []Point{pt("f", Floor), pt("a", Candidate), pt("a", Reference)}}, false},
		{"no name", Config{Points: []Point{pt("f", Floor), pt("", Candidate)}}, false},
		{"unknown role", Config{Points: []Point{pt("f", Floor), pt("a", "fastest")}}, false},
		{"no Measure", Config{Points: []Point{pt("f", Floor), {Name: "a", Role: Candidate}}}, false},
		{"negative rounds", Config{Points: []Point{pt("f", Floor)}, Rounds: -1}, false},
		{"too many rounds", Config{Points: []Point{pt("f", Floor)}, Rounds: MaxRounds + 1}, false},
	} {
		err := tc.cfg.Validate()
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrConfig)) {
			t.Errorf("%s: %v, want ok=%v", tc.name, err, tc.ok)
		}
		if _, rerr := Run(context.Background(), tc.cfg); !tc.ok && rerr == nil {
			t.Errorf("%s: Run accepted it", tc.name)
		}
	}
}
