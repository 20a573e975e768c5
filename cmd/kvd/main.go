package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/kvd-project/kvd/internal/cli"
	"github.com/kvd-project/kvd/internal/kv"
	"github.com/kvd-project/kvd/internal/store"
	"github.com/kvd-project/kvd/internal/tlsutil"
	"github.com/kvd-project/kvd/internal/version"
	"github.com/kvd-project/kvd/internal/watch"
	"github.com/kvd-project/kvd/raft"
	"github.com/kvd-project/kvd/server"
	"github.com/kvd-project/kvd/transport"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return // -h: usage was printed
		}
		fmt.Fprintln(os.Stderr, "kvd:", err)
		var fe *failure
		if errors.As(err, &fe) {
			os.Exit(1)
		}
		os.Exit(2)
	}
}

// failure marks an error of a node that was set up as its flags asked and
// then failed (a damaged backup, the disk, a busy port): exit status 1.
// Every other error is the flags' (exit status 2), and is found before the
// node touches its data directory.
type failure struct{ err error }

func (f *failure) Error() string { return f.err.Error() }
func (f *failure) Unwrap() error { return f.err }

type options struct {
	cfg           server.Config
	peerListen    peerListen
	redis         redisFlags
	transport     cli.TransportFlags
	frontKey      string // --rdma-auth-client-name: the key of the node's own etcd and Redis fronts
	tls           cli.ServerTLSFlags
	certs         *tlsutil.Store // the TLS material tls names, once loaded (setupTLS)
	etcd          etcdFlags
	etcdURLs      []clientURL // checked --listen-client-urls (checkNodeEtcd)
	tableMem      cli.Size
	cluster       string
	metricsListen string
	logLevel      string
	logFormat     string
	faults        bool
	pprof         bool
	version       bool
	unknownEnv    []string // KVD_ variables that name no flag
}

func parseFlags(args []string) (*options, error) {
	o := &options{tableMem: server.DefaultTableMem}
	fs := flag.NewFlagSet("kvd", flag.ContinueOnError)
	fs.Uint64Var(&o.cfg.ID, "id", 1, "this node's id (> 0), as named in --initial-cluster")
	fs.StringVar(&o.cfg.Listen, "listen", "127.0.0.1:7301", "address for clients, and for peers without --listen-peer (host:port)")
	registerPeerListen(fs, &o.peerListen)
	registerRedisFlags(fs, &o.redis)
	fs.StringVar(&o.cfg.DataDir, "data-dir", "", "directory for the node's durable state (required)")
	o.transport.Register(fs)
	o.transport.RegisterRDMATuning(fs)
	fs.StringVar(&o.frontKey, "rdma-auth-client-name", "",
		"RDMA: the rw (or ro) key in --rdma-auth-file that this node's --listen-client-urls and --redis-listen connect to the cluster with; needed with them and --rdma-auth-file (the node's own peer key is refused client requests)")
	o.tls.Register(fs)
	o.etcd.register(fs, "", " on this node (empty: off)", false)
	fs.Var(&o.tableMem, "table-mem", "size of the registered table region (e.g. 64MiB, 1GiB)")
	fs.DurationVar(&o.cfg.ReuseGrace, "reuse-grace", server.DefaultReuseGrace, "how long superseded records stay untouched before their memory is reused")
	o.cfg.TableInline = server.DefaultTableInline
	fs.Var((*inlineFlag)(&o.cfg.TableInline), "table-inline",
		"inline budget per slot in bytes (multiple of 8), or off: small records live in an arena beside their bucket, so a GET of one is one round trip of two READs; costs about 10x this per bucket of 8 slots (off: records out of place, two round trips, about 8x the keys per --table-mem)")
	fs.DurationVar(&o.cfg.TableInlineGrace, "table-inline-grace", 0,
		"how long superseded inline records stay untouched before their arena bytes are reused (0: min(100ms, --reuse-grace))")
	fs.StringVar(&o.cluster, "initial-cluster", "", "every member as ID=HOST:PORT,...; a new --data-dir needs it (1=127.0.0.1:7301 for a single-node cluster) or --join")
	fs.BoolVar(&o.cfg.Join, "join", false, "join an existing cluster (add this node with 'kvctl member add' first)")
	fs.StringVar(&o.cfg.InitialClusterToken, "initial-cluster-token", raft.DefaultClusterToken,
		"names the cluster at creation: with --initial-cluster it makes the cluster id peers must present; use one unique to each cluster (ignored with --join)")
	fs.StringVar(&o.cfg.Restore, "restore", "",
		"start a new cluster from this backup (kvctl snapshot save): every initial member gets the same file, its own empty --data-dir, and the new cluster's --initial-cluster and a new --initial-cluster-token; a non-empty --data-dir is refused, so restart without it")
	fs.Uint64Var(&o.cfg.SnapshotCount, "snapshot-count", server.DefaultSnapshotCount, "applied entries between snapshots (bounds the Raft log)")
	fs.StringVar(&o.cfg.RaftLog, "raft-log", store.DefaultRaftLog,
		"where the Raft log is kept: wal (a dedicated log in --data-dir/wal, one fdatasync per Raft batch, the state written unsynced and rebuilt from the log at start) or pebble (in the state's database, one synced batch per Raft batch); a pebble directory started with wal is converted, the converse is refused")
	fs.DurationVar(&o.cfg.TickInterval, "tick", server.DefaultTickInterval, "Raft tick interval; elections time out after 10 ticks")
	fs.Float64Var(&o.cfg.LeaseDrift, "lease-drift", raft.DefaultLeaseDrift, "the most any clock may run faster than another, as a fraction: the read lease is shortened by it, and clients must be given the same bound")
	fs.IntVar(&o.cfg.MaxConnections, "max-connections", server.DefaultMaxConnections,
		"the most connections (clients' and peers') held at once by each listener; more are refused, with a message to the dialer over tcp, and counted in kvd_connections_refused_total")
	fs.StringVar(&o.cfg.AutoCompactionMode, "auto-compaction-mode", kv.DefaultAutoCompactionMode,
		"how the leader compacts the history: periodic (keep --auto-compaction-retention of time) or revision (keep that many revisions)")
	fs.StringVar(&o.cfg.AutoCompactionRetention, "auto-compaction-retention", kv.DefaultAutoCompactionRetention,
		"history to keep: periodic, a duration (1h, 30m) or hours (1); revision, a number of revisions; 0: never compact automatically")
	fs.IntVar(&o.cfg.Watch.HistoryEvents, "watch-history-events", watch.DefaultHistoryEvents,
		"the most recent events kept in memory to serve watches; older ones are read from the stored history")
	fs.IntVar(&o.cfg.Watch.HistoryBytes, "watch-history-bytes", watch.DefaultHistoryBytes, "the most bytes of keys and values the watch history keeps")
	fs.IntVar(&o.cfg.Watch.MaxWatchers, "max-watches", watch.DefaultMaxWatchers, "the most watches open on this node at once")
	fs.IntVar(&o.cfg.MaxWatchesPerConn, "max-watches-per-conn", server.DefaultMaxWatchesPerConn, "the most watches one client connection may open")
	fs.DurationVar(&o.cfg.WatchProgressNotifyInterval, "watch-progress-notify-interval", server.DefaultWatchProgressNotifyInterval,
		"how often a watch made with progress_notify (kvctl watch --progress-notify) that sent nothing meanwhile is told the revision it is complete through (at least 1s)")
	fs.StringVar(&o.metricsListen, "metrics-listen", "", "address for HTTP /metrics and /healthz (empty: off)")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&o.logFormat, "log-format", "text", "log format: text or json")
	fs.BoolVar(&o.pprof, "enable-pprof", false, "serve net/http/pprof under /debug/pprof/ on --metrics-listen (CPU and heap profiles)")
	fs.BoolVar(&o.faults, "enable-fault-injection", false, "serve POST /debug/faults on --metrics-listen (tests only): ?drop=ADDR,... cuts this node off from those peers (tcp transport), ?freeze=10s freezes it for that long as SIGSTOP would while its region still answers one-sided READs")
	fs.BoolVar(&o.version, "version", false, "print the version and exit")
	if err := cli.Parse(fs, args, os.Stderr, nodeUsage(fs)); err != nil {
		return nil, err
	}
	if fs.NArg() == 1 && fs.Arg(0) == "version" {
		o.version = true
		return o, nil
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q (all settings are flags; see kvd -h)", fs.Args())
	}
	if err := cli.ApplyEnv(fs, "KVD_", "version"); err != nil {
		return nil, err
	}
	o.unknownEnv = cli.UnknownEnv(fs, "KVD_", "version")
	o.cfg.ListenPeer = o.peerListen.addr
	cluster, err := cli.ParseCluster(o.cluster)
	if err != nil {
		return nil, fmt.Errorf("--initial-cluster: %w", err)
	}
	o.cfg.InitialCluster = cluster
	if err := refuseZeros(fs); err != nil {
		return nil, err
	}
	if o.tableMem > 1<<40 {
		return nil, fmt.Errorf("--table-mem %d is too large", o.tableMem)
	}
	o.cfg.TableMem = int(o.tableMem)
	return o, nil
}

// zeroIsDefault are the flags whose 0 the server takes as "the default"
// (a Config's zero value): given explicitly, a 0 (say --max-watches 0 to
// turn watches off) would run with the default, not with what was asked.
var zeroIsDefault = append([]string{"table-mem", "table-inline", "reuse-grace", "snapshot-count", "tick", "max-connections",
	"watch-history-events", "watch-history-bytes", "max-watches", "max-watches-per-conn", "watch-progress-notify-interval"},
	redisZeroIsDefault...)

// refuseZeros refuses an explicit 0 (flag or KVD_ variable) for the flags
// of zeroIsDefault.
func refuseZeros(fs *flag.FlagSet) error {
	var err error
	fs.Visit(func(f *flag.Flag) {
		if err == nil && (slices.Contains(zeroIsDefault, f.Name) || slices.Contains(etcdZeroIsDefault, f.Name)) {
			if v := f.Value.String(); v == "0" || v == "0s" {
				want := "a positive value"
				if f.Name == "table-inline" {
					want = "a budget in bytes or off (no arenas)"
				}
				err = fmt.Errorf("--%s 0: want %s; the default is %s", f.Name, want, f.DefValue)
			}
		}
	})
	return err
}

// checkNodeFlags refuses what the server would take in another sense than
// the operator meant: id 0 (the server would run as node 1), a drift of 0
// (it would run with the default), and a --listen that cannot be the
// node's member address when it is one (no --initial-cluster).
func checkNodeFlags(c *server.Config) error {
	switch {
	case c.ID == 0:
		return errors.New("--id 0: a node's id must be > 0")
	case c.LeaseDrift == 0:
		return errors.New("--lease-drift 0: want a fraction in (0, 0.5]; no two clocks run at exactly the same rate")
	}
	if _, port, err := net.SplitHostPort(c.Listen); err != nil || port == "" {
		return fmt.Errorf("--listen %q: want host:port", c.Listen)
	}
	if len(c.InitialCluster) == 0 && !c.Join {
		name, addr := peerListenFlag(c)
		if err := transport.CheckAddr(addr); err != nil {
			return fmt.Errorf("--%s %q is this single node's member address, which peers added later dial: %w (or give --initial-cluster)", name, addr, err)
		}
	}
	if c.TableInlineGrace != 0 && c.TableInline == server.TableInlineOff {
		return errors.New("--table-inline-grace applies to inline records only, and --table-inline is off")
	}
	return nil
}

// checkRunFlags refuses what conflicts among the flags kvd itself acts on.
func checkRunFlags(o *options) error {
	// Over rdma, --listen is an rdma_cm address, whose ports are its own
	// (on InfiniBand and RoCE; iWARP shares TCP's, and fails at listen).
	if o.metricsListen != "" && o.transport.Name == "tcp" && sharePort(o.metricsListen, o.cfg.Listen) {
		return fmt.Errorf("--metrics-listen %q and --listen %q are one port", o.metricsListen, o.cfg.Listen)
	}
	if o.tls.ReloadInterval < 0 {
		return fmt.Errorf("--tls-reload-interval %v: want 0 (only on SIGHUP) or more", o.tls.ReloadInterval)
	}
	if err := checkRedisFlags(o); err != nil {
		return err
	}
	if err := checkFrontKey(o); err != nil {
		return err
	}
	return checkPeerListen(o)
}

// sharePort reports whether listening on a and on b collide: the same port,
// and the same host or an unspecified one (which takes every address).
func sharePort(a, b string) bool {
	ha, pa, err1 := net.SplitHostPort(a)
	hb, pb, err2 := net.SplitHostPort(b)
	if err1 != nil || err2 != nil || pa != pb {
		return false
	}
	return ha == hb || anyHost(ha) || anyHost(hb)
}

// anyHost reports whether a listen address's host takes every address.
func anyHost(h string) bool {
	ip := net.ParseIP(h)
	return h == "" || (ip != nil && ip.IsUnspecified())
}

// warnAddrMismatch warns when this node listens on another port, or
// another host, than its --initial-cluster entry, which its peers dial:
// they will not reach it unless something in between forwards.
func warnAddrMismatch(c *server.Config, log *slog.Logger) {
	name, listen := peerListenFlag(c)
	addr, ok := c.InitialCluster[c.ID]
	if !ok || addr == listen {
		return
	}
	lh, lp, err1 := net.SplitHostPort(listen)
	ah, ap, err2 := net.SplitHostPort(addr)
	if err1 != nil || err2 != nil {
		return
	}
	if lp == ap && (lh == ah || anyHost(lh)) {
		return
	}
	log.Warn("--"+name+" differs from this node's --initial-cluster address, which its peers dial",
		name, listen, "member_address", addr, "id", c.ID)
}

// peerListenFlag names the flag of the address the node listens on for
// peers, and that address.
func peerListenFlag(c *server.Config) (name, addr string) {
	if c.ListenPeer != "" {
		return "listen-peer", c.ListenPeer
	}
	return "listen", c.Listen
}

func newLogger(level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: l}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

func run(args []string) error {
	if len(args) > 0 && args[0] == "gateway" {
		return runGateway(args[1:])
	}
	o, err := parseFlags(args)
	if err != nil {
		return err
	}
	if o.version {
		fmt.Print("kvd ", version.Get())
		return nil
	}
	log, err := newLogger(o.logLevel, o.logFormat)
	if err != nil {
		return err
	}
	for _, name := range o.unknownEnv {
		log.Warn("ignoring an environment variable that names no flag", "variable", name)
	}
	if err := checkRequired(o); err != nil {
		return err
	}
	// The data directory holds every key and value, as a backup does
	// (kvctl writes those 0600): only kvd's user may enter a new one.
	if err := os.MkdirAll(o.cfg.DataDir, 0o700); err != nil {
		return &failure{err}
	}
	tr, peerTr, stopTLS, err := transports(o, log)
	if err != nil {
		return err
	}
	defer stopTLS()
	defer tr.Close()
	faultTr := tr // drop= cuts peers off
	if peerTr != nil {
		defer peerTr.Close()
		faultTr = peerTr
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildInfo())
	o.cfg.Transport, o.cfg.PeerTransport, o.cfg.Logger, o.cfg.Registerer = tr, peerTr, log, reg

	if err := checkBeforeStart(o, log); err != nil {
		return err
	}
	var metricsLn net.Listener
	if o.metricsListen != "" {
		if metricsLn, err = net.Listen("tcp", o.metricsListen); err != nil {
			return &failure{fmt.Errorf("--metrics-listen: %w", err)}
		}
	}
	front, err := bindEtcd(o.etcdURLs)
	if err != nil {
		if metricsLn != nil {
			metricsLn.Close()
		}
		return err
	}
	srv, err := server.New(o.cfg)
	if err != nil {
		if metricsLn != nil {
			metricsLn.Close()
		}
		front.close()
		return &failure{openErr(o.cfg.DataDir, err)}
	}
	stopRedis, err := startRedis(o, reg, log)
	if err != nil {
		front.close()
		srv.Close()
		if metricsLn != nil {
			metricsLn.Close()
		}
		return err
	}
	defer stopRedis()
	if len(o.etcdURLs) > 0 {
		if err := serveNodeEtcd(front, o, log); err != nil {
			front.close()
			srv.Close()
			return &failure{err}
		}
	}
	var httpSrv *http.Server
	if metricsLn != nil {
		httpSrv = serveMetrics(metricsLn, reg, srv, log, faultHandler(o.faults, faultTr, srv), o.pprof)
	}
	return serveUntilStopped(srv, httpSrv, front, log)
}

// checkRequired refuses flags that need another flag given.
func checkRequired(o *options) error {
	switch {
	case o.cfg.DataDir == "":
		return errors.New("--data-dir is required")
	case o.pprof && o.metricsListen == "":
		return errors.New("--enable-pprof needs --metrics-listen")
	case o.faults && o.metricsListen == "":
		return errors.New("--enable-fault-injection needs --metrics-listen")
	}
	return nil
}

// checkBeforeStart checks everything the flags say before the node touches
// its data directory: a restore must not run for a node that then refuses
// its flags (the directory, no longer empty, would refuse the restore
// asked again).
func checkBeforeStart(o *options, log *slog.Logger) error {
	if err := checkNodeFlags(&o.cfg); err != nil {
		return err
	}
	if err := checkRunFlags(o); err != nil {
		return err
	}
	if err := checkNodeEtcd(o); err != nil {
		return err
	}
	warnAddrMismatch(&o.cfg, log)
	if err := o.cfg.Validate(); err != nil {
		return err
	}
	if err := checkNewCluster(&o.cfg); err != nil {
		return err
	}
	return checkDataDirFree(o.cfg.DataDir)
}

// serveUntilStopped runs the node until SIGINT or SIGTERM, which shut it
// down cleanly, or until it fails (its storage, or its removal from the
// cluster), which ends kvd with the cause.
func serveUntilStopped(srv *server.Server, httpSrv *http.Server, front *etcdFront, log *slog.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	select {
	case <-ctx.Done():
	case <-srv.Failed():
		front.close()
		return &failure{failureExit(srv, httpSrv, log)}
	}
	log.Info("shutting down")
	front.close()
	if httpSrv != nil {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		httpSrv.Shutdown(sctx)
		cancel()
	}
	if err := srv.Close(); err != nil {
		return &failure{err}
	}
	return nil
}

// setupTLS loads the TLS material the flags name, if any (nil if none),
// and from then on reloads it on SIGHUP and when the files change, until
// stop is called. Material that does not load is an error: kvd does not
// start.
func setupTLS(o *options, log *slog.Logger) (certs *tlsutil.Store, stop func(), err error) {
	files := o.tls.ServerFiles()
	files.PeerListener = o.cfg.ListenPeer != ""
	if !files.Enabled() {
		return nil, func() {}, files.Check()
	}
	// The rdma transport refuses TLS (cli.TransportFlags.Transport).
	certs, err = tlsutil.NewServer(files, log)
	if err != nil {
		return nil, nil, fmt.Errorf("TLS: %w", err)
	}
	o.certs = certs
	log.Info(tlsSummary(files), "client_cert_auth", files.ClientCertAuth,
		"peer_client_cert_auth", files.PeerClientCertAuth)
	ctx, cancel := context.WithCancel(context.Background())
	if o.tls.ReloadInterval > 0 {
		go certs.Watch(ctx, o.tls.ReloadInterval)
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				log.Info("SIGHUP: reloading the TLS material")
				certs.Reload() // logs a failure, and keeps the material in use
			}
		}
	}()
	return certs, func() { signal.Stop(hup); cancel() }, nil
}

// After a failure (its storage, or its removal from the cluster) kvd
// lingers for failureExitLinger, answering every request with the failure
// ("kvd: storage: <cause>", /healthz 503) so that requests in flight get
// that answer rather than a closed connection, then shuts down, waiting at
// most failureExitTimeout (the process exits then even if something is
// stuck on the failed disk).
const (
	failureExitLinger  = time.Second
	failureExitTimeout = 5 * time.Second
)

// failureExit stops a node that failed and returns the failure, so that
// kvd exits non-zero naming the cause. A storage failure (a full or
// read-only disk, a failed fsync): the node has already stopped
// acknowledging anything, and restarting kvd once the disk is fixed
// recovers every acknowledged write. A removal: the node serves nothing
// more, and its data directory is refused from then on.
func failureExit(srv *server.Server, httpSrv *http.Server, log *slog.Logger) error {
	err := srv.Failure()
	if errors.Is(err, raft.ErrRemoved) {
		log.Error("removed from the cluster: exiting; to reuse this machine, wipe the data directory and add it again under a new member id",
			"err", err, "exit_in", failureExitLinger)
	} else {
		log.Error("storage failure: exiting; restart kvd once the disk is fixed", "err", err, "exit_in", failureExitLinger)
	}
	time.Sleep(failureExitLinger)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if httpSrv != nil {
			sctx, cancel := context.WithTimeout(context.Background(), time.Second)
			httpSrv.Shutdown(sctx)
			cancel()
		}
		srv.Close() // its error repeats the failure
	}()
	select {
	case <-done:
	case <-time.After(failureExitTimeout):
		log.Error("shutdown after the failure did not finish; exiting anyway", "timeout", failureExitTimeout)
	}
	return err
}

// inlineFlag is --table-inline: a budget in bytes, or "off"
// (server.TableInlineOff).
type inlineFlag int

func (f *inlineFlag) String() string {
	if int(*f) == server.TableInlineOff {
		return "off"
	}
	return strconv.Itoa(int(*f))
}

func (f *inlineFlag) Set(s string) error {
	if s == "off" {
		*f = server.TableInlineOff
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return fmt.Errorf("want a budget in bytes or off, not %q", s)
	}
	*f = inlineFlag(n)
	return nil
}
