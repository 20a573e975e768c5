package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/cli"
	buildinfo "github.com/kvd-project/kvd/internal/version"
	"github.com/kvd-project/kvd/transport"
)

const usage = `usage: kvctl [flags] COMMAND [ARGS]

commands:
  put KEY [VALUE]         store VALUE under KEY (no VALUE: --value-file or stdin)
  put --ignore-value KEY  rewrite KEY keeping its value; put --ignore-lease KEY VALUE
                          keeps its lease (KEY must exist)
  get KEY                 print KEY's value (exit 1 if it does not exist)
  get --prefix P          print every key starting with P and its value, in key order
  get KEY END, get --from-key KEY, get --from A [--to B]
                          print the keys from KEY or A (inclusive) to END or B
                          (exclusive; none: to the end) and their values; with
                          --limit N, --keys-only (keys only), --count-only (the
                          number only), --sort-by CREATE|KEY|MODIFY|VALUE|VERSION
                          and --order ASCEND|DESCEND
  mget KEY...             print each KEY and its value, reading them in batches
                          (exit 1 if any does not exist; they are named on stderr);
                          with --atomic, values that all held at one moment
  del KEY                 delete KEY; prints how many keys it deleted (1 or 0)
  del KEY END, del --prefix KEY, del --from-key KEY
                          delete a range in one revision; --prev-kv prints the
                          deleted keys and values after the count
  put --if-mod-revision N KEY [VALUE], del --if-mod-revision N KEY
                          only if KEY's mod revision is N (0: KEY must not
                          exist); else exit 1 naming KEY's mod revision
  txn                     run a transaction read from stdin: compares, a blank
                          line, operations if they hold, a blank line,
                          operations otherwise; operations are put, get and del
                          with their flags, or txn { ... } (see docs/kvctl.md)
  put --lease ID KEY [VALUE]
                          attach KEY to lease ID: deleted when the lease ends
  lease grant TTL         grant a lease of TTL (seconds, or e.g. 1m); prints its ID
  lease keepalive ID      keep lease ID alive until interrupted, printing its TTL
  lease revoke ID         end lease ID now, deleting its keys
  lease ttl ID            show lease ID's TTL, time remaining and key count
  lease list              list the leases that exist
  watch [--prefix] KEY [--rev N] [--prev-kv] [--progress-notify]
                          print KEY's (--prefix: every key under it) PUT and
                          DELETE events, one line each, from now or from
                          revision N, until interrupted; --prev-kv adds each
                          event's previous value
  compaction REV          compact the history to revision REV: reads and
                          watches below it fail as compacted
  status                  show every endpoint's id, cluster, leader, term, indexes and
                          size; exit 1, with a warning each, if any is unreachable,
                          of another cluster or without a leader, or two lead
  endpoint status         the same as status
  endpoint health         check that each endpoint serves a linearizable read
                          (exit 1 if any cannot)
  member list             list the cluster's members
  member add ID ADDR      add node ID at ADDR as a learner (then start it with --join)
  member promote ID       make learner ID a voter once it has caught up
  member remove ID        remove node ID
  move-leader ID          make voter ID the leader
  snapshot save FILE      write a backup of the cluster's state (from the leader,
                          checked) to FILE; without --timeout it may take as
                          long as it needs
  snapshot status FILE    check a backup and print its index, keys and checksum
  version                 print kvctl's version (also --version)
  help                    print this help (also -h)

flags:
`

type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func main() {
	os.Exit(report(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr), os.Stderr))
}

// report prints run's error on stderr and returns the exit status: 0, 1
// when the operation failed (a missing key, a conflict, ...), 2 on a usage
// error.
func report(err error, stderr io.Writer) int {
	var ue usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp): // -h: usage was printed
		return 0
	case errors.As(err, &ue):
		msg := err.Error()
		if hint := "(" + cli.Hint("kvctl") + ")"; !strings.HasSuffix(msg, hint) {
			msg += " " + hint
		}
		fmt.Fprintln(stderr, "kvctl:", msg) // one line: the usage is a -h away
		return 2
	}
	fmt.Fprintln(stderr, "kvctl:", err)
	return 1
}

type options struct {
	endpoints   string
	transport   cli.TransportFlags
	tls         cli.ClientTLSFlags
	consistency string
	write       string
	valueFile   string
	ifVersion   versionFlag
	atomic      bool // mget: one snapshot
	lease       leaseFlag
	fromVersion versionFlag // get and watch --rev
	fromKey     bool        // del --from-key
	prevKV      bool        // put, del and watch --prev-kv
	ignoreValue bool        // put --ignore-value
	ignoreLease bool        // put --ignore-lease
	progress    bool        // watch --progress-notify
	scan        scanFlags   // get's range options (scan.go)
	timeout     time.Duration
	timeoutSet  bool // --timeout was given (a snapshot save has no default bound)
	attempt     time.Duration
	leaseDrift  float64
	version     bool
	clusterID   clusterIDFlag // the cluster the endpoints must be of (status.go)
}

// versionFlag is --if-mod-revision: a mod revision, and whether it was given.
type versionFlag struct {
	set bool
	v   uint64
}

func (f *versionFlag) String() string {
	if !f.set {
		return ""
	}
	return strconv.FormatUint(f.v, 10)
}

func (f *versionFlag) Set(s string) error {
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return errors.New("want a version: a non-negative integer (0: the key must not exist)")
	}
	f.set, f.v = true, v
	return nil
}

// writeOptions are put's and del's options from the flags.
func (o *options) writeOptions() []client.WriteOption {
	var opts []client.WriteOption
	if o.ifVersion.set {
		opts = append(opts, client.IfModRevision(o.ifVersion.v))
	}
	if o.lease.id != 0 {
		opts = append(opts, client.WithLease(o.lease.id))
	}
	if o.ignoreValue {
		opts = append(opts, client.WithIgnoreValue())
	}
	if o.ignoreLease {
		opts = append(opts, client.WithIgnoreLease())
	}
	return opts
}

// parse accepts flags before, between and after positional arguments.
func parse(args []string, stderr io.Writer) (*options, []string, error) {
	o := &options{}
	fs := flag.NewFlagSet("kvctl", flag.ContinueOnError)
	printUsage := func(w io.Writer) { fmt.Fprint(w, usage); fs.SetOutput(w); fs.PrintDefaults() }
	fs.StringVar(&o.endpoints, "endpoints", "127.0.0.1:7301", "comma-separated kvd addresses")
	o.transport.Register(fs)
	o.tls.Register(fs)
	fs.StringVar(&o.consistency, "consistency", "linearizable", "get consistency: linearizable, serializable or readindex")
	fs.StringVar(&o.write, "w", "simple", "output format: simple, json, table, or raw (get: the value's bytes exactly, nothing added)")
	fs.StringVar(&o.valueFile, "value-file", "", "put: read the value from this file (without it, a put with no VALUE reads standard input)")
	fs.Var(&o.ifVersion, "if-mod-revision", "put, del: only if the key's mod revision is this (0: the key must not exist); else exit 1 naming its mod revision")
	fs.BoolVar(&o.atomic, "atomic", false, "mget: values that all held at one applied index (one snapshot of the keys)")
	fs.Var(&o.lease, "lease", "put: attach the key to this lease (an ID lease grant printed)")
	fs.BoolVar(&o.scan.prefix, "prefix", false, "get: every key starting with KEY, in key order; watch: every key starting with KEY")
	fs.Var(&o.fromVersion, "rev", "get: the keys as they were at this store revision; watch: the events from this revision on (default: from now)")
	fs.Var(&o.scan.from, "from", "get: the keys from this one on (inclusive), in key order")
	fs.BoolVar(&o.fromKey, "from-key", false, "get, del: every key from KEY on (inclusive)")
	fs.BoolVar(&o.prevKV, "prev-kv", false, "put, del: print the previous key and value (del: every key it deleted); watch: each event's previous value")
	fs.BoolVar(&o.ignoreValue, "ignore-value", false, "put KEY: keep the key's current value (give no VALUE; the key must exist), as etcdctl's")
	fs.BoolVar(&o.ignoreLease, "ignore-lease", false, "put: keep the key's current lease (not with --lease; the key must exist), as etcdctl's")
	fs.BoolVar(&o.progress, "progress-notify", false, "watch: print a progress notification (progress notify: REV) whenever the watch was quiet for the servers' --watch-progress-notify-interval")
	fs.Var(&o.scan.to, "to", "get: with --from, the keys before this one (exclusive; omitted: no upper bound)")
	fs.IntVar(&o.scan.limit, "limit", 0, "get --prefix/--from: at most this many keys (0: all)")
	fs.BoolVar(&o.scan.keysOnly, "keys-only", false, "get --prefix/--from: print the keys, not their values")
	fs.BoolVar(&o.scan.count, "count-only", false, "get --prefix/--from: print only the number of keys (the limit aside)")
	fs.BoolVar(&o.scan.count, "count", false, "get: the same as --count-only")
	fs.Var(&o.scan.sortBy, "sort-by", "get --prefix/--from: sort by CREATE, KEY, MODIFY, VALUE or VERSION (default: key order)")
	fs.Var(&o.scan.order, "order", "get --prefix/--from: ASCEND or DESCEND (default ASCEND)")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "give up on a command after this long")
	fs.DurationVar(&o.attempt, "attempt-timeout", 0, "how long one attempt at one node may take before the client tries another (client.Config.AttemptTimeout; 0: the client's default, 1s): raise it for large values on a slow disk")
	fs.Var(&o.clusterID, "cluster-id", "refuse endpoints of any other cluster than this one (its hex id, as status prints it; default: the one most endpoints name)")
	fs.Float64Var(&o.leaseDrift, "lease-drift", client.DefaultLeaseDrift,
		"the servers' --lease-drift (the most any clock may run faster than another, a fraction up to 0.5): linearizable one-sided GETs judge the leader's lease by it, so it must not be less than theirs")
	fs.BoolVar(&o.version, "version", false, "print kvctl's version and exit")
	var pos []string
	for {
		if err := cli.Parse(fs, args, stderr, printUsage); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, nil, err
			}
			return nil, nil, usageError{err.Error()} // exit 2, as every usage error
		}
		if fs.NArg() == 0 {
			break
		}
		rest := fs.Args()
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			pos = append(pos, rest...) // everything after -- is positional
			break
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
	if err := cli.ApplyEnv(fs, "KVCTL_", "version"); err != nil {
		return nil, nil, usageError{err.Error()}
	}
	for _, name := range cli.UnknownEnv(fs, "KVCTL_", "version") {
		fmt.Fprintf(stderr, "kvctl: warning: ignoring %s, which names no flag\n", name)
	}
	fs.Visit(func(f *flag.Flag) { o.timeoutSet = o.timeoutSet || f.Name == "timeout" })
	if o.timeout <= 0 {
		return nil, nil, usageError{fmt.Sprintf("--timeout %v: want a positive duration", o.timeout)}
	}
	if o.attempt < 0 {
		return nil, nil, usageError{fmt.Sprintf("--attempt-timeout %v: want a positive duration (0: the default)", o.attempt)}
	}
	if !(o.leaseDrift > 0 && o.leaseDrift <= 0.5) { // NaN fails too
		return nil, nil, usageError{fmt.Sprintf("--lease-drift %v: want a fraction in (0, 0.5]", o.leaseDrift)}
	}
	if err := o.tls.Files.Check(); err != nil {
		return nil, nil, usageError{err.Error()}
	}
	switch o.write {
	case "simple", "json", "table", "raw":
	default:
		return nil, nil, usageError{fmt.Sprintf("-w %q: want simple, json, table or raw", o.write)}
	}
	return o, pos, nil
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return runIn(context.Background(), args, stdin, stdout, stderr)
}

// runIn is run in ctx: an interrupt ends the command, and so does the end
// of ctx (tests end a watch so).
func runIn(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	o, pos, err := parse(args, stderr)
	if err != nil {
		return err
	}
	if o.version || len(pos) > 0 && pos[0] == "version" {
		printVersion(stdout)
		return nil
	}
	if len(pos) > 0 && pos[0] == "help" {
		return parseHelp(stderr)
	}
	if len(pos) == 0 {
		return usageError{"no command given"}
	}
	level, err := client.ParseConsistency(o.consistency)
	if err != nil {
		return usageError{err.Error()}
	}
	eps := splitEndpoints(o.endpoints)
	if len(eps) == 0 {
		return usageError{"--endpoints is empty"}
	}
	cmd, ok := commands[pos[0]]
	if !ok {
		return usageError{fmt.Sprintf("unknown command %q", pos[0])}
	}
	if o.fromVersion.set && pos[0] != "watch" && pos[0] != "get" {
		return usageError{"--rev applies to get and watch only"}
	}
	rangeGet := pos[0] == "get" && (len(pos) == 3 || o.fromKey) // get KEY END, get --from-key KEY
	if rangeGet || o.scan.any() && !((pos[0] == "watch" || isDel(pos[0])) && o.scan.onlyPrefix()) {
		if pos[0] != "get" {
			return usageError{"--from, --to, --limit, --keys-only, --count-only, --sort-by and --order apply to get only (--prefix to get, del and watch)"}
		}
		cmd = command{cmd.args, []int{0, 1, 2}, runScan}
		if err := o.scan.check(pos[1:], o.fromKey); err != nil {
			return err
		}
	}
	if err := cmd.check(pos[1:]); err != nil {
		return err
	}
	if err := checkFlagScope(o, pos[0]); err != nil {
		return err
	}
	for _, ep := range eps {
		if err := transport.CheckAddr(ep); err != nil {
			return usageError{"--endpoints: " + err.Error()}
		}
	}
	if o.transport.TLS, err = o.tls.TLS(); err != nil {
		return err
	}
	tr, err := o.transport.Transport("")
	if err != nil {
		return usageError{"--transport: " + err.Error()}
	}
	defer tr.Close()
	c, err := client.New(client.Config{Endpoints: eps, Transport: tr, Consistency: level, LeaseDrift: o.leaseDrift,
		ClusterID: client.ClusterID(o.clusterID), AttemptTimeout: o.attempt})
	if err != nil {
		return err
	}
	defer c.Close()
	base, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(base, o.timeout)
	if pos[0] == "snapshot" && !o.timeoutSet {
		// A backup takes as long as the state is large; each chunk's
		// wait is still bounded (client.Snapshot).
		ctx, cancel = context.WithCancel(base)
	}
	defer cancel()
	return cmd.run(ctx, &env{c: c, o: o, eps: eps, in: stdin, out: stdout, errOut: stderr, base: base}, pos[1:])
}

// checkFlagScope refuses a command's flag given to another command.
func checkFlagScope(o *options, cmd string) error {
	switch {
	case o.ifVersion.set && cmd != "put" && cmd != "del" && cmd != "delete":
		return usageError{"--if-mod-revision applies to put and del only"}
	case o.atomic && cmd != "mget":
		return usageError{"--atomic applies to mget only"}
	case o.lease.id != 0 && cmd != "put":
		return usageError{"--lease applies to put only"}
	case (o.ignoreValue || o.ignoreLease) && cmd != "put":
		return usageError{"--ignore-value and --ignore-lease apply to put only"}
	case o.ignoreValue && o.valueFile != "":
		return usageError{"put --ignore-value takes no value: not with --value-file"}
	case o.valueFile != "" && cmd != "put":
		return usageError{"--value-file applies to put only"}
	case o.fromKey && !isDel(cmd) && cmd != "get":
		return usageError{"--from-key applies to get and del only"}
	case o.prevKV && cmd != "put" && cmd != "watch" && !isDel(cmd):
		return usageError{"--prev-kv applies to put, del and watch only"}
	case o.progress && cmd != "watch":
		return usageError{"--progress-notify applies to watch only"}
	case o.ifVersion.set && isDel(cmd) && (o.fromKey || o.scan.prefix || o.prevKV):
		return usageError{"--if-mod-revision deletes one key: not with --prefix, --from-key or --prev-kv"}
	}
	return nil
}

func isDel(cmd string) bool { return cmd == "del" || cmd == "delete" }

func splitEndpoints(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// printVersion prints what `kvctl version` prints: etcdctl's first line,
// then the build, as `kvd --version` prints it.
func printVersion(w io.Writer) {
	i := buildinfo.Get()
	rev := i.Revision
	if rev == "" {
		rev = "unknown"
	}
	fmt.Fprintf(w, "kvctl version: %s\nGit SHA: %s\nGo Version: %s\nGo OS/Arch: %s\n", i.Version, rev, i.GoVersion, i.Platform)
}

// parseHelp prints the usage, as -h does.
func parseHelp(stderr io.Writer) error {
	_, _, err := parse([]string{"-h"}, stderr)
	return err
}
