package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// maxReadmeLines is the README's hard limit: past it, move text to docs/.
const maxReadmeLines = 300

// markdownFiles are the manuals the tests below read: the repository's
// top-level *.md, bench's, scripts', and every *.md under docs/.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, g := range []string{"../*.md", "../bench/*.md", "../scripts/*/*.md"} {
		m, err := filepath.Glob(g)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

var linkRE = regexp.MustCompile(`\]\(([^)\s]*)\)`)

func TestReadmeShortAndLinksEveryDoc(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	if n := strings.Count(readme, "\n"); n > maxReadmeLines {
		t.Errorf("README.md has %d lines, more than %d: move reference text to docs/", n, maxReadmeLines)
	}
	links := map[string]bool{}
	for _, m := range linkRE.FindAllStringSubmatch(readme, -1) {
		target, _, _ := strings.Cut(m[1], "#")
		links[filepath.Clean(target)] = true
	}
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".md") {
			return err
		}
		if !links[filepath.Join("docs", path)] {
			t.Errorf("README.md does not link docs/%s", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestNoHistoryInDocs keeps the manuals about what the code does: how it
// got there belongs in commit messages.
func TestNoHistoryInDocs(t *testing.T) {
	bad := regexp.MustCompile(`(?i)[(]review|issue [0-9]+|older build|a build from before|this week|last session`)
	for _, f := range markdownFiles(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if m := bad.FindString(line); m != "" {
				t.Errorf("%s:%d: %q is history, not reference", f, i+1, m)
			}
		}
	}
}

// slug is the anchor GitHub gives a heading.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestLinksResolve checks that every relative link in the manuals names a
// file that exists and, with a #fragment, a heading in it.
func TestLinksResolve(t *testing.T) {
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		a := map[string]bool{}
		if b, err := os.ReadFile(path); err == nil {
			inCode := false
			for _, line := range strings.Split(string(b), "\n") {
				if strings.HasPrefix(line, "```") {
					inCode = !inCode
				}
				if !inCode && strings.HasPrefix(line, "#") {
					a[slug(strings.TrimLeft(line, "#"))] = true
				}
			}
		}
		anchors[path] = a
		return a
	}
	for _, f := range markdownFiles(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range linkRE.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, frag, _ := strings.Cut(target, "#")
			path := f
			if file != "" {
				path = filepath.Join(filepath.Dir(f), file)
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s: link %q: no such file", f, target)
					continue
				}
			}
			if frag != "" && strings.HasSuffix(path, ".md") && !anchorsOf(path)[frag] {
				t.Errorf("%s: link %q: no heading with that anchor in %s", f, target, path)
			}
		}
	}
}

// TestTestingNamesExist keeps docs/testing.md's map of guarantees to tests
// true as tests move: every test it names must exist somewhere.
func TestTestingNamesExist(t *testing.T) {
	b, err := os.ReadFile("testing.md")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, m := range regexp.MustCompile("`((Test|Fuzz)[A-Za-z0-9_]+)`").FindAllStringSubmatch(string(b), -1) {
		want[m[1]] = true
	}
	decl := regexp.MustCompile(`(?m)^func ((Test|Fuzz)[A-Za-z0-9_]+)\(`)
	err = filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && path != ".." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllStringSubmatch(string(src), -1) {
			delete(want, m[1])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name := range want {
		t.Errorf("testing.md names %s, which no test declares", name)
	}
}

// TestEveryFlagDocumented: every flag kvd and kvctl define is named in the
// manual that describes it.
func TestEveryFlagDocumented(t *testing.T) {
	flagRE := regexp.MustCompile(`fs\.[A-Za-z0-9]+Var\([^,]+, "([a-z0-9-]+)"`)
	read := func(paths ...string) string {
		var b strings.Builder
		for _, p := range paths {
			src, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			b.Write(src)
		}
		return b.String()
	}
	for _, c := range []struct {
		src  []string
		docs []string
	}{
		{[]string{"../cmd/kvd/main.go", "../internal/cli/cli.go"}, []string{"operations.md", "security.md", "kvctl.md"}},
		{[]string{"../cmd/kvd/etcd.go", "../cmd/kvd/gateway.go"}, []string{"etcd.md"}},
		{[]string{"../cmd/kvctl/main.go"}, []string{"kvctl.md"}},
	} {
		docs := read(c.docs...)
		for _, m := range flagRE.FindAllStringSubmatch(read(c.src...), -1) {
			if !regexp.MustCompile(`-` + regexp.QuoteMeta(m[1]) + `\b`).MatchString(docs) {
				t.Errorf("flag --%s (%s) is in none of %v", m[1], strings.Join(c.src, ", "), c.docs)
			}
		}
	}
}
