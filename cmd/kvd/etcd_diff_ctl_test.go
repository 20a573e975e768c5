package main_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ctlStep is one etcdctl run of the differential script. Its args may
// hold placeholders, filled in per side: {p} the script's key prefix,
// {r+N} the revision N writes after the script's start, {lease} the lease
// the script granted.
type ctlStep struct {
	name  string
	args  []string
	stdin string
	// watch: the run is a watch, ended once it printed this many lines (or
	// ended itself, or watchBound passed).
	watch int
}

// untilExit as a watch step's line count: the watch ends by itself (the
// server cancels it), and all it printed is compared.
const untilExit = 1 << 20

// watchBound bounds a watch step that prints fewer lines than it should.
const watchBound = 15 * time.Second

// ctlScript is the etcdctl script: each step's revision arguments count
// the writes before it, which must be the same on both sides (etcd's store
// gives every write transaction the next revision).
func ctlScript() []ctlStep {
	s := func(name string, args ...string) ctlStep { return ctlStep{name: name, args: args} }
	txn := func(name, compares, success, failure string, args ...string) ctlStep {
		return ctlStep{name: name, args: append([]string{"txn", "-i"}, args...), stdin: compares + "\n\n" + success + "\n\n" + failure + "\n\n"}
	}
	var tooMany []string
	for i := 0; i <= 128; i++ {
		tooMany = append(tooMany, fmt.Sprintf("put {p}many/%d x", i))
	}
	steps := []ctlStep{
		s("put", "put", "{p}k", "v"), // r+1
		s("get", "get", "{p}k"),
		s("put p/a", "put", "{p}p/a", "1"), // r+2
		s("put p/b", "put", "{p}p/b", "2"), // r+3
		s("put p/c", "put", "{p}p/c", "3"), // r+4
		s("get --prefix", "get", "{p}p/", "--prefix"),
		s("get --prefix -w json", "get", "{p}p/", "--prefix", "-w", "json"),
		s("get --from-key --limit", "get", "{p}p/b", "--from-key", "--limit", "2", "-w", "json"),
		s("get --prefix --limit", "get", "{p}p/", "--prefix", "--limit", "1", "-w", "json"),
		s("get --sort-by=KEY --order=DESCEND", "get", "{p}p/", "--prefix", "--sort-by=KEY", "--order=DESCEND"),
		s("get --sort-by=MODIFY --order=DESCEND", "get", "{p}p/", "--prefix", "--sort-by=MODIFY", "--order=DESCEND"),
		s("get --sort-by=VALUE --limit", "get", "{p}p/", "--prefix", "--sort-by=VALUE", "--order=DESCEND", "--limit", "2", "-w", "json"),
		s("get --keys-only", "get", "{p}p/", "--prefix", "--keys-only"),
		s("get --keys-only -w json", "get", "{p}p/", "--prefix", "--keys-only", "-w", "json"),
		s("get --count-only -w json", "get", "{p}p/", "--prefix", "--count-only", "-w", "json"),
		s("get --print-value-only", "get", "{p}k", "--print-value-only"),
		s("get missing -w json", "get", "{p}missing", "-w", "json"),
		s("put again", "put", "{p}k", "v2"), // r+5
		s("get -w json", "get", "{p}k", "-w", "json"),
		s("get --rev past -w json", "get", "{p}k", "--rev", "{r+1}", "-w", "json"),
		s("get --rev before the key", "get", "{p}k", "--rev", "{r+0}", "-w", "json"),
		s("get --rev future", "get", "{p}k", "--rev", "{r+1000}"),
		s("put --prev-kv -w json", "put", "{p}k", "v3", "--prev-kv", "-w", "json"),       // r+6
		s("put -w json", "put", "{p}d/x", "1", "-w", "json"),                             // r+7
		s("put d/y", "put", "{p}d/y", "2"),                                               // r+8
		s("del --prev-kv", "del", "{p}d/x", "--prev-kv"),                                 // r+9
		s("put d/z", "put", "{p}d/z", "3"),                                               // r+10
		s("del --prefix -w json", "del", "{p}d/", "--prefix", "--prev-kv", "-w", "json"), // r+11
		s("del missing -w json", "del", "{p}d/x", "-w", "json"),
		s("get deleted", "get", "{p}d/", "--prefix"),
		s("put t", "put", "{p}t", "v1"),                                             // r+12
		txn("txn value success", `value("{p}t") = "v1"`, "put {p}t v2", "get {p}t"), // r+13
		txn("txn value failure", `value("{p}t") = "v1"`, "put {p}t v3", "get {p}t"),
		txn("txn version -w json", `version("{p}t") = "2"`, "get {p}t", "put {p}t v4", "-w", "json"),
		txn("txn create", `create("{p}t") = "{r+12}"`, "get {p}t", "del {p}t"),
		txn("txn get --rev", `create("{p}t") = "{r+12}"`, "get {p}t --rev={r+12}", "del {p}t"),
		txn("txn mod failure -w json", `mod("{p}t") < "{r+13}"`, "del {p}t", "get {p}t\nget {p}p/ --prefix --limit=1", "-w", "json"),
		txn("txn duplicate key", `value("{p}t") = "v2"`, "put {p}t2 x\ndel {p}t2", ""),
		txn("txn put del -w json", `value("{p}t") = "v2"`, "put {p}t2 x --prev-kv\ndel {p}k --prev-kv", "", "-w", "json"), // r+14
		txn("txn too many ops", `value("{p}t") = "v2"`, strings.Join(tooMany, "\n"), ""),
		{name: "put too large", args: []string{"put", "{p}big"}, stdin: strings.Repeat("x", 1800<<10)},
		s("put c", "put", "{p}c", "1"),   // r+15
		s("put c 2", "put", "{p}c", "2"), // r+16
		s("compaction", "compaction", "{r+15}"),
		s("get --rev below compaction", "get", "{p}c", "--rev", "{r+13}"),
		s("get --rev at compaction -w json", "get", "{p}c", "--rev", "{r+15}", "-w", "json"),
		s("compaction again", "compaction", "{r+15}"),
		s("compaction below", "compaction", "{r+2}"),
		s("put w/1", "put", "{p}w/1", "a"),   // r+17
		s("put w/1 b", "put", "{p}w/1", "b"), // r+18
		s("put w/2", "put", "{p}w/2", "c"),   // r+19
		s("del w/2", "del", "{p}w/2"),        // r+20
		{name: "watch --rev --prev-kv", args: []string{"watch", "{p}w/", "--prefix", "--rev", "{r+17}", "--prev-kv"}, watch: 15},
		{name: "watch --rev one key", args: []string{"watch", "{p}w/1", "--rev", "{r+18}"}, watch: 3},
		{name: "watch --rev compacted", args: []string{"watch", "{p}w/", "--prefix", "--rev", "{r+2}"}, watch: untilExit},
		{name: "watch --rev compacted -w json", args: []string{"watch", "{p}w/", "--prefix", "--rev", "{r+2}", "-w", "json"}, watch: untilExit},
		s("lease grant", "lease", "grant", "600"),
		s("lease keep-alive --once", "lease", "keep-alive", "--once", "{lease}"),
		s("put --lease", "put", "--lease", "{lease}", "{p}l", "v"), // r+21
		s("get leased -w json", "get", "{p}l", "-w", "json"),
		s("lease timetolive --keys", "lease", "timetolive", "{lease}", "--keys"),
		s("lease list", "lease", "list"),
		s("lease revoke", "lease", "revoke", "{lease}"), // r+22
		s("lease timetolive revoked", "lease", "timetolive", "{lease}"),
		s("get revoked", "get", "{p}l"),
		s("lease revoke again", "lease", "revoke", "{lease}"),
		s("put --lease unknown", "put", "--lease", "1234abcd", "{p}l", "v"),
		s("get after all -w json", "get", "{p}", "--prefix", "--count-only", "-w", "json"),
	}
	return steps
}

var (
	revArgRE     = regexp.MustCompile(`\{r\+(\d+)\}`)
	leaseGrantRE = regexp.MustCompile(`lease ([0-9a-f]+) granted`)
	remainingRE  = regexp.MustCompile(`remaining\(\d+s\)`)
)

// ctlRunner runs the etcdctl script against one side.
type ctlRunner struct {
	t     *testing.T
	c     etcdctl
	p     string
	norm  *normaliser
	lease string
}

// fill replaces s's placeholders with this side's values.
func (r *ctlRunner) fill(s string) string {
	s = strings.ReplaceAll(s, "{p}", r.p)
	s = strings.ReplaceAll(s, "{lease}", r.lease)
	return revArgRE.ReplaceAllStringFunc(s, func(m string) string {
		n, _ := strconv.ParseInt(revArgRE.FindStringSubmatch(m)[1], 10, 64)
		return fmt.Sprint(r.norm.base + n)
	})
}

// step runs one step and returns what it printed, normalised: stdout,
// then stderr's lines marked "! ", then the exit status if not 0.
func (r *ctlRunner) step(s ctlStep) string {
	args := make([]string, len(s.args))
	for i, a := range s.args {
		args[i] = r.fill(a)
	}
	var stdout, stderr string
	var err error
	if s.watch > 0 {
		stdout, stderr, err = r.watch(s.watch, args)
	} else {
		stdout, stderr, err = r.c.run(r.fill(s.stdin), args...)
	}
	if m := leaseGrantRE.FindStringSubmatch(stdout); m != nil && r.lease == "" {
		r.lease = m[1]
		r.norm.addID(m[1], "<lease>")
	}
	// The remaining TTL is a clock reading, not behaviour.
	stdout = remainingRE.ReplaceAllString(stdout, "remaining(<ttl>)")
	out := r.norm.text(stdout)
	if e := r.norm.text(stderr); e != "" {
		out += "\n! " + strings.ReplaceAll(e, "\n", "\n! ")
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) && s.watch == 0 {
		out += fmt.Sprintf("\nexit %d", ee.ExitCode())
	} else if err != nil && s.watch == 0 {
		out += "\nerror " + err.Error()
	}
	return out
}

// watch runs etcdctl watch until it printed n lines or ended, within
// watchBound, and returns its output.
func (r *ctlRunner) watch(n int, args []string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), watchBound)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.c.bin, append([]string{"--endpoints", r.c.endpoints}, args...)...)
	var o, e syncBuffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err = <-done:
			return o.String(), e.String(), err
		case <-tick.C:
			if strings.Count(o.String(), "\n") >= n {
				cmd.Process.Kill()
				<-done
				return o.String(), e.String(), nil
			}
		}
	}
}

// ctlBase is the store revision a side is at: the header revision of a
// read.
func ctlBase(t *testing.T, c etcdctl) int64 {
	t.Helper()
	out := c.ok("get", "etcd-diff-base", "-w", "json")
	var r struct {
		Header struct {
			Revision int64 `json:"revision"`
		} `json:"header"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("get -w json: %v\n%s", err, out)
	}
	return r.Header.Revision
}

// runCtlScript runs the etcdctl script against endpoints with the keys
// under prefix p, and returns each step's normalised output.
func runCtlScript(t *testing.T, bin string, endpoints []string, p string) []stepOut {
	c := etcdctlAt(t, bin, endpoints...)
	r := &ctlRunner{t: t, c: c, p: p, norm: &normaliser{base: ctlBase(t, c), endpoints: endpoints}}
	var outs []stepOut
	for _, s := range ctlScript() {
		outs = append(outs, stepOut{name: s.name, out: r.step(s)})
	}
	return outs
}

// stepOut is what one step of a script printed, normalised.
type stepOut struct{ name, out string }
