package result

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

// Markers frame a report printed on a console among other output (the RDMA
// VM's serial console): WriteMarked prints them, Extract finds them.
const (
	BeginMarker = "KVBENCH-REPORT-BEGIN"
	EndMarker   = "KVBENCH-REPORT-END"
)

// WriteJSON writes rep as indented JSON.
func WriteJSON(w io.Writer, rep *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// WriteMarked writes rep as JSON between BeginMarker and EndMarker lines.
func WriteMarked(w io.Writer, rep *Report) error {
	if _, err := fmt.Fprintln(w, BeginMarker); err != nil {
		return err
	}
	if err := WriteJSON(w, rep); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, EndMarker)
	return err
}

// ReadJSON decodes one report and checks its schema.
func ReadJSON(r io.Reader) (*Report, error) {
	var rep Report
	dec := json.NewDecoder(r)
	if err := dec.Decode(&rep); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFormat, err)
	}
	if rep.Schema < 1 || rep.Schema > SchemaVersion {
		return nil, fmt.Errorf("%w: schema %d (this kvbench reads 1..%d)", ErrFormat, rep.Schema, SchemaVersion)
	}
	return &rep, nil
}

// Extract returns every report printed between markers in console output.
// Carriage returns (serial consoles add them) and anything before a marker
// on its line are ignored.
func Extract(r io.Reader) ([]*Report, error) {
	var out []*Report
	var buf bytes.Buffer
	in := false
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		switch {
		case strings.HasSuffix(line, BeginMarker):
			in = true
			buf.Reset()
		case in && strings.HasSuffix(line, EndMarker):
			in = false
			rep, err := ReadJSON(&buf)
			if err != nil {
				return nil, err
			}
			out = append(out, rep)
		case in:
			buf.WriteString(line)
			buf.WriteByte('\n')
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if in {
		return nil, fmt.Errorf("%w: %s without %s (output cut short?)", ErrFormat, BeginMarker, EndMarker)
	}
	return out, nil
}

// ReadFile reads a report file, or every marked report in a console log,
// and merges what it found into one report.
func ReadFile(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if t := bytes.TrimSpace(b); len(t) > 0 && t[0] == '{' {
		rep, err := ReadJSON(bytes.NewReader(t))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return rep, nil
	}
	reps, err := Extract(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(reps) == 0 {
		return nil, fmt.Errorf("%w: %s is neither JSON nor holds a %s block", ErrFormat, path, BeginMarker)
	}
	return Merge(reps...), nil
}

// Merge concatenates reports, keeping every source's Meta.
func Merge(reps ...*Report) *Report {
	out := &Report{Schema: SchemaVersion}
	for _, r := range reps {
		out.Meta = append(out.Meta, r.Meta...)
		out.Runs = append(out.Runs, r.Runs...)
		out.Baselines = append(out.Baselines, r.Baselines...)
	}
	return out
}

// Series lists the distinct series of the report's runs and baselines, in
// order of first appearance.
func (rep *Report) Series() []string {
	var out []string
	seen := map[string]bool{}
	add := func(s string) {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	for _, r := range rep.Runs {
		add(r.Series)
	}
	for _, b := range rep.Baselines {
		add(b.Series)
	}
	return out
}
