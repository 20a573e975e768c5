package etcdseries

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// The manuals that quote the etcd series mark the quoted rows with these
// lines around them.
const (
	quoteBegin = "<!-- etcd-series rows: copied from bench/results/etcd.md -->"
	quoteEnd   = "<!-- /etcd-series rows -->"
)

// TestDocsQuoteTheResults: every table row the README and bench/README
// quote from the etcd series is a row of bench/results/etcd.md, so a
// manual cannot state numbers the results do not hold.
func TestDocsQuoteTheResults(t *testing.T) {
	t.Parallel()
	res, err := os.ReadFile("../results/etcd.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]bool{}
	for _, l := range strings.Split(string(res), "\n") {
		rows[l] = true
	}
	for _, doc := range []string{"../../README.md", "../README.md"} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		quoted, err := quotedRows(string(b))
		if err != nil {
			t.Errorf("%s: %v", doc, err)
			continue
		}
		if len(quoted) == 0 {
			t.Errorf("%s quotes no row of the etcd series between %q and %q", doc, quoteBegin, quoteEnd)
		}
		for _, q := range quoted {
			if !rows[q] {
				t.Errorf("%s quotes a row bench/results/etcd.md does not have:\n%s", doc, q)
			}
		}
	}
}

// quotedRows are the data rows (not headers or rules) between the
// markers.
func quotedRows(doc string) ([]string, error) {
	var out []string
	in, header := false, false
	for _, l := range strings.Split(doc, "\n") {
		switch {
		case l == quoteBegin:
			in, header = true, true
		case l == quoteEnd:
			in = false
		case in && strings.TrimSpace(l) == "":
			header = true // a table may follow, with a header of its own
		case in && strings.HasPrefix(l, "|---"):
			header = false
		case in && strings.HasPrefix(l, "| ") && !header:
			out = append(out, l)
		}
	}
	if in {
		return nil, fmt.Errorf("no %q after %q", quoteEnd, quoteBegin)
	}
	return out, nil
}
