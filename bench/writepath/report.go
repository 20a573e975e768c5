package writepath

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/kvd-project/kvd/bench/stats"
)

// Files Save writes.
const (
	MarkdownFile = "writepath.md"
	JSONFile     = "writepath.json"
)

// Meta describes a run. The caller sets the shape; Run sets the rest.
type Meta struct {
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Rounds   int       `json:"rounds"`
	CPUs     int       `json:"cpus"`
	// LoadBefore, LoadAfter: /proc/loadavg at the start and the end (the
	// machine may be shared).
	LoadBefore string `json:"load_before"`
	LoadAfter  string `json:"load_after"`
	// The shape: Clients connections (client instances), each with one
	// PUT in flight, over Keys keys of ValueSize bytes.
	Clients   int `json:"clients"`
	Keys      int `json:"keys"`
	ValueSize int `json:"value_size"`
	// WarmupSeconds and Seconds are each point's unmeasured and measured
	// parts.
	WarmupSeconds float64 `json:"warmup_seconds"`
	Seconds       float64 `json:"seconds"`
}

// PointInfo names a point in the report.
type PointInfo struct {
	Name   string `json:"name"`
	Role   Role   `json:"role"`
	Detail string `json:"detail,omitempty"`
}

// Sample is one point measured in one round.
type Sample struct {
	Point string `json:"point"`
	Round int    `json:"round"` // from 1
	Order int    `json:"order"` // its place in the round, from 1
	Measurement
}

// Row is a point's medians over the rounds and their ratios. A ratio is 0
// where it has no meaning for the point's role or lacks a side.
type Row struct {
	Point  string      `json:"point"`
	Role   Role        `json:"role"`
	Rounds int         `json:"rounds"`
	Median Measurement `json:"median"`
	// CPUOverFloor is the median CPU per PUT over the floor's median.
	CPUOverFloor float64 `json:"cpu_over_floor,omitempty"`
	// PutsOverBaseline and P50OverBaseline are a candidate's median
	// throughput and one-client p50 over the baseline's.
	PutsOverBaseline float64 `json:"puts_over_baseline,omitempty"`
	P50OverBaseline  float64 `json:"p50_over_baseline,omitempty"`
}

// Report is a run: its points, every sample, and the points that failed.
type Report struct {
	Meta    Meta        `json:"meta"`
	Points  []PointInfo `json:"points"`
	Samples []Sample    `json:"samples"`
	Errors  []string    `json:"errors,omitempty"`
}

// Summary is a row per point, in the points' order.
func (r *Report) Summary() []Row {
	rows := make([]Row, 0, len(r.Points))
	for _, p := range r.Points {
		var cpu, puts, p50 []float64
		for _, s := range r.Samples {
			if s.Point == p.Name {
				cpu, puts, p50 = append(cpu, s.CPUPerPut), append(puts, s.PutsPerSec), append(p50, s.P50)
			}
		}
		rows = append(rows, Row{Point: p.Name, Role: p.Role, Rounds: len(cpu),
			Median: Measurement{CPUPerPut: stats.Median(cpu), PutsPerSec: stats.Median(puts), P50: stats.Median(p50)}})
	}
	floor, base := r.find(rows, Floor), r.find(rows, Baseline)
	for i := range rows {
		row := &rows[i]
		if row.Role != Floor && floor != nil {
			row.CPUOverFloor = ratio(row.Median.CPUPerPut, floor.Median.CPUPerPut)
		}
		if row.Role == Candidate && base != nil {
			row.PutsOverBaseline = ratio(row.Median.PutsPerSec, base.Median.PutsPerSec)
			row.P50OverBaseline = ratio(row.Median.P50, base.Median.P50)
		}
	}
	return rows
}

func (r *Report) find(rows []Row, role Role) *Row {
	for i := range rows {
		if rows[i].Role == role {
			return &rows[i]
		}
	}
	return nil
}

func ratio(a, b float64) float64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	return a / b
}

// Complete reports whether every point was measured in every round;
// otherwise the error wraps ErrIncomplete.
func (r *Report) Complete() error {
	if len(r.Errors) > 0 {
		return fmt.Errorf("%w: %d points failed, the first: %s", ErrIncomplete, len(r.Errors), r.Errors[0])
	}
	for _, row := range r.Summary() {
		if row.Rounds != r.Meta.Rounds {
			return fmt.Errorf("%w: %s measured in %d of %d rounds", ErrIncomplete, row.Point, row.Rounds, r.Meta.Rounds)
		}
	}
	return nil
}

// Save writes MarkdownFile and JSONFile into dir, only if the report is
// complete: an incomplete run leaves dir as it was.
func (r *Report) Save(dir string) error {
	if err := r.Complete(); err != nil {
		return err
	}
	var md, js bytes.Buffer
	if err := r.WriteMarkdown(&md); err != nil {
		return err
	}
	if err := r.WriteJSON(&js); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		b    []byte
	}{{MarkdownFile, md.Bytes()}, {JSONFile, js.Bytes()}} {
		path := filepath.Join(dir, f.name)
		if err := os.WriteFile(path+".tmp", f.b, 0o644); err != nil {
			return err
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			return err
		}
	}
	return nil
}

// WriteJSON writes the report with its summary.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		*Report
		Summary []Row `json:"summary"`
	}{r, r.Summary()})
}
