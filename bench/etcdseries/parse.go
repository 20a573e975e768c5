package etcdseries

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// ErrNoSummary: the tool's output held no report with latencies (it
// failed, or every request failed).
var ErrNoSummary = errors.New("etcdseries: no summary in the benchmark's output")

// Summary is one report of etcd's benchmark tool. Times are in seconds.
type Summary struct {
	Total      float64            `json:"total"`
	Average    float64            `json:"average"`
	Slowest    float64            `json:"slowest"`
	Fastest    float64            `json:"fastest"`
	PerSecond  float64            `json:"ops_per_sec"`
	Percentile map[string]float64 `json:"percentile"` // "50", "99", "99.9"
	Errors     int                `json:"errors"`     // failed requests
	// ErrorText counts the failed requests by error message.
	ErrorText map[string]int `json:"error_text,omitempty"`
}

// Output is one run's reports by title: "" for the tool's only report
// (put, range, txn-put, lease keepalive); "Put" and "Watch events" for
// watch-latency's two.
type Output map[string]Summary

// Parse reads the tool's stdout. Lines it does not know (the progress bar,
// the histogram) are skipped.
func Parse(r io.Reader) (Output, error) {
	out := Output{}
	title, inErrors := "", false
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasSuffix(line, " summary:"):
			title, inErrors = strings.TrimSuffix(line, " summary:"), false
			continue
		case line == "Summary:":
			inErrors = false
			if _, ok := out[title]; !ok {
				out[title] = Summary{Percentile: map[string]float64{}}
			}
			continue
		case line == "Error distribution:":
			inErrors = true
			continue
		}
		if err := parseLine(out, title, line, inErrors); err != nil {
			return nil, err
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	found := false
	for _, s := range out {
		zeroBelow(s.Percentile)
		found = found || s.PerSecond > 0 && len(s.Percentile) > 0
	}
	if !found {
		return nil, ErrNoSummary
	}
	return out, nil
}

// toolPercentiles are the percentiles the tool computes. It prints only
// those above zero (a watch event that arrives before its put returns is
// timed at zero), so one missing below a printed one was zero; one
// missing above the last printed had too few samples and stays absent.
var toolPercentiles = []string{"10", "25", "50", "75", "90", "95", "99", "99.9"}

func zeroBelow(pct map[string]float64) {
	for i := len(toolPercentiles) - 1; i >= 0; i-- {
		if _, ok := pct[toolPercentiles[i]]; ok {
			for _, lower := range toolPercentiles[:i] {
				if _, ok := pct[lower]; !ok {
					pct[lower] = 0
				}
			}
			return
		}
	}
}

// parseLine folds one line into the report being read.
func parseLine(out Output, title, line string, inErrors bool) error {
	s, ok := out[title]
	if !ok && inErrors {
		s = Summary{Percentile: map[string]float64{}}
	} else if !ok {
		return nil
	}
	if inErrors {
		// "[count]\tmessage"
		if n, msg, ok := errorLine(line); ok {
			s.Errors += n
			if s.ErrorText == nil {
				s.ErrorText = map[string]int{}
			}
			s.ErrorText[msg] += n
			out[title] = s
		}
		return nil
	}
	name, val, found := strings.Cut(line, ":")
	if found {
		var dst *float64
		switch name {
		case "Total":
			dst = &s.Total
		case "Average":
			dst = &s.Average
		case "Slowest":
			dst = &s.Slowest
		case "Fastest":
			dst = &s.Fastest
		case "Requests/sec":
			dst = &s.PerSecond
		default:
			return nil
		}
		v, err := seconds(val)
		if err != nil {
			return fmt.Errorf("etcdseries: %q: %w", line, err)
		}
		*dst = v
		out[title] = s
		return nil
	}
	// "50% in 0.0012 secs."
	pct, rest, found := strings.Cut(line, "% in ")
	if !found {
		return nil
	}
	if _, err := strconv.ParseFloat(pct, 64); err != nil {
		return nil
	}
	v, err := seconds(rest)
	if err != nil {
		return fmt.Errorf("etcdseries: %q: %w", line, err)
	}
	s.Percentile[pct] = v
	out[title] = s
	return nil
}

// seconds parses "0.0012 secs." or "1234.5".
func seconds(s string) (float64, error) {
	s = strings.TrimSpace(s)
	s = strings.TrimSuffix(s, ".")
	s = strings.TrimSpace(strings.TrimSuffix(s, "secs"))
	return strconv.ParseFloat(s, 64)
}

// errorLine reads an error distribution line: "[n]\tmessage".
func errorLine(line string) (int, string, bool) {
	if !strings.HasPrefix(line, "[") {
		return 0, "", false
	}
	end := strings.IndexByte(line, ']')
	if end < 0 {
		return 0, "", false
	}
	n, err := strconv.Atoi(line[1:end])
	return n, strings.TrimSpace(line[end+1:]), err == nil
}
