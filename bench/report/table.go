package report

import (
	"fmt"
	"io"
	"strings"
)

// table is a markdown table built row by row.
type table struct {
	header []string
	right  []bool // right-align numeric columns
	rows   [][]string
}

func newTable(cols ...string) *table {
	t := &table{}
	for _, c := range cols {
		// A leading '>' marks a numeric (right-aligned) column.
		name, num := strings.CutPrefix(c, ">")
		t.header = append(t.header, name)
		t.right = append(t.right, num)
	}
	return t
}

func (t *table) add(cells ...string) {
	if len(cells) != len(t.header) {
		panic(fmt.Sprintf("report: row of %d cells for %d columns", len(cells), len(t.header)))
	}
	t.rows = append(t.rows, cells)
}

func (t *table) write(w io.Writer) error {
	var b strings.Builder
	line := func(cells []string) {
		b.WriteString("|")
		for _, c := range cells {
			b.WriteString(" ")
			b.WriteString(strings.ReplaceAll(c, "|", `\|`))
			b.WriteString(" |")
		}
		b.WriteString("\n")
	}
	line(t.header)
	b.WriteString("|")
	for _, r := range t.right {
		if r {
			b.WriteString("---:|")
		} else {
			b.WriteString("---|")
		}
	}
	b.WriteString("\n")
	for _, r := range t.rows {
		line(r)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// us formats microseconds with about three significant digits.
func us(v float64) string {
	switch {
	case v <= 0:
		return "–"
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// cpu formats CPU microseconds per op, where zero is a real answer (no
// CPU above idle), unlike a missing latency.
func cpu(v float64) string {
	if v <= 0 {
		return "0"
	}
	return us(v)
}

// times formats a ratio as "3.2×", or "–" if there is none.
func times(v float64) string {
	if v <= 0 {
		return "–"
	}
	if v >= 100 {
		return fmt.Sprintf("%.0f×", v)
	}
	return fmt.Sprintf("%.1f×", v)
}

func count(n uint64) string { return fmt.Sprintf("%d", n) }

func rate(v float64) string {
	if v <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f", v)
}

// perGet formats a per-GET byte count, "–" if there is none.
func perGet(v float64) string {
	if v <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f", v)
}

func frac(v float64) string {
	if v <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", v)
}

// bytes formats a size as 16 B, 4 KiB, 1 MiB.
func bytes(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}
