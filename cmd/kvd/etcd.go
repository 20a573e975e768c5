package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/url"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/etcdapi"
	"github.com/kvd-project/kvd/internal/tlsutil"
	"github.com/kvd-project/kvd/transport"
)

// etcdFlags are the flags of etcd's v3 API (internal/etcdapi), under
// etcd's names, shared by a node and `kvd gateway`. The limits' flags are
// named as etcdapi.Config's fields (MaxRequestBytes ↔ --max-request-bytes).
type etcdFlags struct {
	listen    string // --listen-client-urls
	advertise string // --advertise-client-urls
	cfg       etcdapi.Config
	streams   uint64 // --max-concurrent-streams, checked into cfg
}

// etcdZeroIsDefault are the etcd flags whose 0 etcdapi takes as its
// default (refuseZeros).
var etcdZeroIsDefault = []string{"max-request-bytes", "max-txn-ops", "max-concurrent-streams"}

// register adds the flags to fs; listen is --listen-client-urls'
// default, oneSided --one-sided-gets'.
func (f *etcdFlags) register(fs *flag.FlagSet, listen, what string, oneSided bool) {
	fs.StringVar(&f.listen, "listen-client-urls", listen,
		"etcd's v3 API: comma-separated http://HOST:PORT (plaintext) or https://HOST:PORT (TLS, with --cert-file) URLs to serve it on"+what)
	fs.StringVar(&f.advertise, "advertise-client-urls", "",
		"etcd's v3 API: the URLs etcd clients reach it at, reported in member lists (default: the --listen-client-urls, with the ports bound)")
	fs.IntVar(&f.cfg.MaxRequestBytes, "max-request-bytes", etcdapi.DefaultMaxRequestBytes,
		"etcd's v3 API: the largest request accepted, in bytes; larger ones fail with etcd's \"request is too large\"")
	fs.BoolVar(&f.cfg.OneSidedGets, "one-sided-gets", oneSided,
		"etcd's v3 API: answer a Range of one key at the latest revision with kvd's linearizable GET, one-sided over rdma; its header revision is then one the value was current at, which may be below the store's (etcd's)")
	fs.IntVar(&f.cfg.MaxTxnOps, "max-txn-ops", etcdapi.DefaultMaxTxnOps, "etcd's v3 API: the most operations one transaction may hold")
	fs.Uint64Var(&f.streams, "max-concurrent-streams", etcdapi.DefaultMaxConcurrentStreams,
		"etcd's v3 API: the most gRPC streams (calls, watch and keep-alive streams) one connection may have open at once")
}

// clientURL is one --listen-client-urls entry.
type clientURL struct {
	tls  bool   // https
	addr string // host:port
}

// parseClientURLs parses a comma list of http:// or https:// URLs with a
// host and port and nothing else, as etcd's --listen-client-urls.
func parseClientURLs(flagName, v string) ([]clientURL, error) {
	var out []clientURL
	for _, s := range strings.Split(v, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
			(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil || u.Fragment != "" {
			return nil, fmt.Errorf("--%s %q: want http://HOST:PORT or https://HOST:PORT", flagName, s)
		}
		if _, port, err := net.SplitHostPort(u.Host); err != nil || port == "" {
			return nil, fmt.Errorf("--%s %q: want http://HOST:PORT or https://HOST:PORT (the port too)", flagName, s)
		}
		out = append(out, clientURL{tls: u.Scheme == "https", addr: u.Host})
	}
	return out, nil
}

// check validates the flags against the client TLS in force (clientTLS:
// a certificate for the listeners, --cert-file) and returns the listen
// URLs; none means etcd's API is off.
func (f *etcdFlags) check(clientTLS bool) ([]clientURL, error) {
	urls, err := parseClientURLs("listen-client-urls", f.listen)
	if err != nil {
		return nil, err
	}
	for _, u := range urls {
		switch {
		case u.tls && !clientTLS:
			return nil, fmt.Errorf("--listen-client-urls https://%s needs TLS for clients: give --cert-file and --key-file, or say http://", u.addr)
		case !u.tls && clientTLS:
			return nil, fmt.Errorf("--listen-client-urls http://%s with --cert-file: client TLS is on, so say https://", u.addr)
		}
	}
	if f.advertise != "" {
		if len(urls) == 0 {
			return nil, errors.New("--advertise-client-urls needs --listen-client-urls")
		}
		if _, err := parseClientURLs("advertise-client-urls", f.advertise); err != nil {
			return nil, err
		}
	}
	if f.streams > math.MaxUint32 {
		return nil, fmt.Errorf("--max-concurrent-streams %d: at most %d", f.streams, uint32(math.MaxUint32))
	}
	f.cfg.MaxConcurrentStreams = uint32(f.streams)
	// The client is made once the listeners are bound; the limits are
	// checked before anything is.
	v := f.cfg
	v.Client = new(client.Client)
	if err := v.Validate(); err != nil {
		return nil, err
	}
	return urls, nil
}

// etcdFront serves etcd's v3 API through a kvd client: on a node, for its
// own cluster; in `kvd gateway`, for the cluster it names.
type etcdFront struct {
	lns []net.Listener
	tls bool
	g   *grpc.Server
	kc  *client.Client
	// closeTr closes the client's transport when the client did not make
	// it (rdma); nil otherwise.
	closeTr func() error
}

// bindEtcd listens on every URL, before anything else is started: a busy
// port is found before the node touches its data directory.
func bindEtcd(urls []clientURL) (*etcdFront, error) {
	f := &etcdFront{}
	for _, u := range urls {
		ln, err := net.Listen("tcp", u.addr)
		if err != nil {
			f.closeListeners()
			return nil, &failure{fmt.Errorf("--listen-client-urls: %w", err)}
		}
		f.lns = append(f.lns, ln)
		f.tls = u.tls
	}
	return f, nil
}

func (f *etcdFront) closeListeners() {
	for _, ln := range f.lns {
		ln.Close()
	}
}

// boundURLs are the listeners' URLs, with the ports bound (for a :0).
func (f *etcdFront) boundURLs() []string {
	scheme := "http"
	if f.tls {
		scheme = "https"
	}
	out := make([]string, len(f.lns))
	for i, ln := range f.lns {
		out[i] = scheme + "://" + ln.Addr().String()
	}
	return out
}

// serve serves etcd's API with kc on the listeners, as member memberID
// (0: as a gateway), with certs' client material when the URLs say https.
// close closes kc and closeTr (if not nil), whether serve failed or not.
func (f *etcdFront) serve(ef *etcdFlags, kc *client.Client, closeTr func() error, memberID uint64, certs *tlsutil.Store, log *slog.Logger) error {
	f.kc, f.closeTr = kc, closeTr
	cfg := ef.cfg
	cfg.Client, cfg.Gateway, cfg.MemberID = kc, memberID == 0, memberID
	cfg.AdvertiseClientURLs = f.boundURLs()
	if ef.advertise != "" {
		cfg.AdvertiseClientURLs = splitList(ef.advertise)
	}
	srv, err := etcdapi.New(cfg)
	if err != nil {
		return err
	}
	var opts []grpc.ServerOption
	if f.tls {
		opts = append(opts, grpc.Creds(credentials.NewTLS(grpcTLS(certs))))
		opts = append(opts, etcdapi.ReadOnlyInterceptors(certs.ReadOnly)...)
	}
	f.g = srv.NewGRPCServer(opts...)
	for _, ln := range f.lns {
		go func() {
			if err := f.g.Serve(ln); err != nil {
				log.Error("etcd API listener failed", "addr", ln.Addr().String(), "err", err)
			}
		}()
	}
	log.Info("serving etcd's v3 API", "urls", strings.Join(f.boundURLs(), ","), "advertise", strings.Join(cfg.AdvertiseClientURLs, ","))
	return nil
}

// grpcTLS is the listeners' TLS configuration: the client material in
// use at each handshake (reloaded as the node's own), offering h2.
func grpcTLS(certs *tlsutil.Store) *tls.Config {
	server := certs.TCP().Server
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2"},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			c, err := server(transport.RoleClient)
			if err != nil || c == nil {
				return nil, errors.New("no TLS material for clients")
			}
			c = c.Clone()
			c.NextProtos = []string{"h2"}
			return c, nil
		},
	}
}

// etcdStopGrace bounds how long calls in flight may finish at shutdown;
// watch and keep-alive streams never end of themselves.
const etcdStopGrace = 2 * time.Second

// close stops serving (calls in flight get etcdStopGrace to finish) and
// closes the client and its transport. Safe on a nil front and on one
// never served.
func (f *etcdFront) close() {
	if f == nil {
		return
	}
	if f.g != nil {
		stopped := make(chan struct{})
		go func() { f.g.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(etcdStopGrace):
			f.g.Stop()
		}
	}
	f.closeListeners()
	if f.kc != nil {
		f.kc.Close()
	}
	if f.closeTr != nil {
		f.closeTr()
	}
}

// splitList splits a comma list, dropping empty entries.
func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// dialable turns a listen address into one to dial: an unspecified host
// (every address) into loopback.
func dialable(addr string) string {
	h, p, err := net.SplitHostPort(addr)
	if err != nil || !anyHost(h) {
		return addr
	}
	if ip := net.ParseIP(h); ip != nil && ip.To4() == nil {
		return net.JoinHostPort("::1", p)
	}
	return net.JoinHostPort("127.0.0.1", p)
}
