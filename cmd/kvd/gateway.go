package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/cli"
	"github.com/kvd-project/kvd/internal/tlsutil"
)

// gatewayOptions are `kvd gateway`'s flags: a process that serves etcd's
// v3 API for a kvd cluster, beside the application, through a kvd client
// (one-sided GETs over rdma).
type gatewayOptions struct {
	endpoints  string
	name       string
	leaseDrift float64
	etcd       etcdFlags
	redis      redisFlags
	transport  cli.TransportFlags
	clientTLS  cli.ClientTLSFlags // to the cluster
	serverTLS  cli.ServerTLSFlags // of the etcd listeners
	logLevel   string
	logFormat  string
	gcPercent  int
	gcSet      bool // --gc-percent given (flag or variable), over GOGC
}

// defaultGCPercent is the gateway's --gc-percent. Its live heap is small
// (requests in flight and the client's buffers), so the runtime's 100
// (collect each time the heap doubles) collects often, and every
// collection takes CPU from requests: on the 2-CPU machine of
// bench/results/etcd.md, 400 cut the gateway's CPU per put by about a
// fifth. The heap may then grow to five times the live one.
const defaultGCPercent = 400

// nodeUsage is kvd -h: the node's flags, after the subcommands.
func nodeUsage(fs *flag.FlagSet) func(w io.Writer) {
	return func(w io.Writer) {
		fmt.Fprint(w, "usage: kvd [flags]          run a node\n"+
			"       kvd gateway [flags]  serve etcd's v3 API for a cluster (kvd gateway -h)\n"+
			"       kvd version\n\nflags:\n")
		fs.SetOutput(w)
		fs.PrintDefaults()
	}
}

// gatewayEnvPrefix prefixes the variables that mirror the gateway's flags
// (KVD_GATEWAY_ENDPOINTS), apart from a node's KVD_ ones.
const gatewayEnvPrefix = "KVD_GATEWAY_"

func parseGatewayFlags(args []string) (*gatewayOptions, error) {
	o := &gatewayOptions{}
	fs := flag.NewFlagSet("kvd gateway", flag.ContinueOnError)
	fs.StringVar(&o.endpoints, "endpoints", "", "the cluster's client addresses, host:port,... (required)")
	fs.StringVar(&o.name, "name", "kvd-gateway", "the member name the gateway reports for itself in member lists")
	fs.Float64Var(&o.leaseDrift, "lease-drift", client.DefaultLeaseDrift, "the most the servers' clocks may run faster than this one's, as a fraction: the nodes' --lease-drift")
	o.etcd.register(fs, "http://127.0.0.1:2379", "", true)
	registerRedisFlags(fs, &o.redis)
	o.transport.Register(fs)
	fs.StringVar(&o.clientTLS.Files.CACert, "cacert", "", "TLS to the cluster: CA bundle (PEM) that verifies the nodes; any of --cacert, --cert, --key turns it on")
	fs.StringVar(&o.clientTLS.Files.Cert, "cert", "", "TLS to the cluster: client certificate (PEM), for nodes with --client-cert-auth")
	fs.StringVar(&o.clientTLS.Files.Key, "key", "", "TLS to the cluster: key (PEM) of --cert")
	fs.StringVar(&o.serverTLS.Files.CertFile, "cert-file", "", "TLS for etcd clients: certificate (PEM) of the https:// --listen-client-urls")
	fs.StringVar(&o.serverTLS.Files.KeyFile, "key-file", "", "TLS for etcd clients: key (PEM) of --cert-file")
	fs.StringVar(&o.serverTLS.Files.TrustedCAFile, "trusted-ca-file", "", "TLS for etcd clients: CA bundle (PEM) that issues their certificates (with --client-cert-auth)")
	fs.BoolVar(&o.serverTLS.Files.ClientCertAuth, "client-cert-auth", false, "TLS for etcd clients: they must show a certificate issued by --trusted-ca-file")
	fs.StringVar(&o.serverTLS.ReadOnlyCN, "read-only-client-cn", "", "TLS for etcd clients: comma-separated certificate common names that may only read; needs --client-cert-auth")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&o.logFormat, "log-format", "text", "log format: text or json")
	fs.IntVar(&o.gcPercent, "gc-percent", defaultGCPercent, "the Go garbage collector's target, as GOGC: the heap grows this many percent over the live heap before a collection; GOGC in the environment is kept unless this flag is given")
	if err := cli.Parse(fs, args, os.Stderr, nil); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q (all settings are flags; see kvd gateway -h)", fs.Args())
	}
	if err := cli.ApplyEnv(fs, gatewayEnvPrefix); err != nil {
		return nil, err
	}
	if err := refuseZeros(fs); err != nil {
		return nil, err
	}
	fs.Visit(func(f *flag.Flag) { o.gcSet = o.gcSet || f.Name == "gc-percent" })
	if o.gcPercent < 1 {
		return nil, fmt.Errorf("--gc-percent %d: want a percentage > 0 (0 collects continually; the gateway does not run without collections)", o.gcPercent)
	}
	if strings.TrimSpace(o.endpoints) == "" {
		return nil, errors.New("--endpoints is required: the cluster's client addresses")
	}
	if len(splitList(o.etcd.listen)) == 0 && o.redis.listen == "" {
		return nil, errors.New("--listen-client-urls and --redis-listen are both empty: the gateway serves etcd's API or Redis' protocol, or both")
	}
	if o.redis.listen != "" {
		if _, _, err := net.SplitHostPort(o.redis.listen); err != nil {
			return nil, fmt.Errorf("--redis-listen %q: want host:port", o.redis.listen)
		}
	}
	return o, nil
}

// runGateway is `kvd gateway`: it serves etcd's API until SIGINT or
// SIGTERM.
func runGateway(args []string) error {
	o, err := parseGatewayFlags(args)
	if err != nil {
		return err
	}
	log, err := newLogger(o.logLevel, o.logFormat)
	if err != nil {
		return err
	}
	o.applyGC(os.Getenv("GOGC"))
	files := o.serverTLS.ServerFiles()
	files.PeerListener = true // no peers: client TLS alone
	urls, err := o.etcd.check(files.CertFile != "")
	if err != nil {
		return err
	}
	var certs *tlsutil.Store
	if files.Enabled() {
		if certs, err = tlsutil.NewServer(files, log); err != nil {
			return fmt.Errorf("TLS: %w", err)
		}
	} else if err := files.Check(); err != nil {
		return err
	}
	var cfiles *tlsutil.ClientFiles
	if o.clientTLS.Files.Enabled() {
		cfiles = &o.clientTLS.Files
	}
	front, err := bindEtcd(urls)
	if err != nil {
		return err
	}
	kc, closeTr, err := newFrontClient(o.transport, cfiles, client.Config{Endpoints: splitList(o.endpoints), LeaseDrift: o.leaseDrift})
	if err != nil {
		front.close()
		return err
	}
	cfg := o.etcd
	cfg.cfg.Name = o.name
	if err := front.serve(&cfg, kc, closeTr, 0, certs, log); err != nil {
		front.close()
		return err
	}
	stopRedis, err := serveGatewayRedis(o, kc, log)
	if err != nil {
		front.close()
		return err
	}
	defer stopRedis()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	log.Info("shutting down")
	front.close()
	return nil
}

// applyGC sets the collector's target to --gc-percent, unless the flag
// was not given and gogc (the GOGC variable, which the runtime has
// applied) is set.
func (o *gatewayOptions) applyGC(gogc string) {
	if o.gcSet || gogc == "" {
		debug.SetGCPercent(o.gcPercent)
	}
}

// serveGatewayRedis serves Redis' protocol on --redis-listen (if set)
// through the gateway's client, whose GETs are one-sided.
func serveGatewayRedis(o *gatewayOptions, kc *client.Client, log *slog.Logger) (stop func(), err error) {
	if o.redis.listen == "" {
		return func() {}, nil
	}
	l, err := net.Listen("tcp", o.redis.listen)
	if err != nil {
		return nil, fmt.Errorf("--redis-listen: %w", err)
	}
	cfg := o.redis.cfg
	cfg.Role, cfg.Logger = "gateway", log
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = -1 // never, as the flag says
	}
	stop, err = ServeRedis(kc, l, cfg, log)
	if err != nil {
		l.Close()
		return nil, err
	}
	log.Info("serving the Redis protocol", "addr", l.Addr().String())
	return stop, nil
}
