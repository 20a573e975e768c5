package cli

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/kvd-project/kvd/internal/tlsutil"
	"github.com/kvd-project/kvd/transport"
	"github.com/kvd-project/kvd/transport/rdma"
	"github.com/kvd-project/kvd/transport/tcp"
)

// EnvName is the environment variable that mirrors flag name:
// prefix + upper-cased name with dashes as underscores (table-mem →
// KVD_TABLE_MEM).
func EnvName(prefix, name string) string {
	return prefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// ApplyEnv sets every flag of fs that was not given on the command line from
// its environment variable, if that is set. Call it after fs.Parse. A bad
// value is an error naming the variable. The flags named in commandLineOnly
// have no variable: an action such as --version must not be taken because
// a KVD_VERSION someone set for a script of their own is in the environment.
func ApplyEnv(fs *flag.FlagSet, prefix string, commandLineOnly ...string) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if err != nil || given[f.Name] || slices.Contains(commandLineOnly, f.Name) {
			return
		}
		env := EnvName(prefix, f.Name)
		if v, ok := os.LookupEnv(env); ok {
			if serr := fs.Set(f.Name, v); serr != nil {
				err = fmt.Errorf("invalid value %q for %s: %v", v, env, serr)
			}
		}
	})
	return err
}

// UnknownEnv lists the environment variables that start with prefix but
// mirror no flag of fs (a misspelt KVD_TABLE_MEMORY, say), sorted, for the
// caller to warn of: as etcd does, they are not an error, but silently
// ignoring one hides a setting the operator believes is in force.
//
// The flags named in commandLineOnly (ApplyEnv's) mirror no variable, so
// theirs are listed too.
func UnknownEnv(fs *flag.FlagSet, prefix string, commandLineOnly ...string) []string {
	known := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) { known[EnvName(prefix, f.Name)] = !slices.Contains(commandLineOnly, f.Name) })
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, prefix) && !known[name] {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// Size is a byte count flag accepting plain numbers and KiB/MiB/GiB (or
// K/M/G, KB/MB/GB as binary multiples) suffixes.
type Size int64

func (s *Size) String() string { return strconv.FormatInt(int64(*s), 10) }

// Set parses a size.
func (s *Size) Set(v string) error {
	n, err := ParseSize(v)
	if err != nil {
		return err
	}
	*s = Size(n)
	return nil
}

// ParseSize parses "4096", "64MiB", "1g" and the like.
func ParseSize(v string) (int64, error) {
	t := strings.TrimSpace(strings.ToLower(v))
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"gib", 1 << 30}, {"mib", 1 << 20}, {"kib", 1 << 10}, {"gb", 1 << 30}, {"mb", 1 << 20}, {"kb", 1 << 10},
		{"g", 1 << 30}, {"m", 1 << 20}, {"k", 1 << 10}, {"b", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("bad size %q (want e.g. 67108864, 64MiB, 1GiB)", v)
	}
	return n * mult, nil
}

// ParseCluster parses "1=host:port,2=host:port" into an id→address map.
func ParseCluster(v string) (map[uint64]string, error) {
	out := map[uint64]string{}
	if strings.TrimSpace(v) == "" {
		return out, nil
	}
	for _, part := range strings.Split(v, ",") {
		id, addr, ok := strings.Cut(strings.TrimSpace(part), "=")
		n, err := strconv.ParseUint(id, 10, 64)
		if !ok || err != nil || n == 0 || addr == "" {
			return nil, fmt.Errorf("bad cluster member %q (want ID=HOST:PORT with ID > 0)", part)
		}
		if err := transport.CheckAddr(addr); err != nil {
			return nil, fmt.Errorf("bad cluster member %q: %w", part, err)
		}
		if _, dup := out[n]; dup {
			return nil, fmt.Errorf("member id %d appears twice", n)
		}
		for other, a := range out {
			if transport.SameAddr(a, addr) {
				return nil, fmt.Errorf("members %d and %d share the address %s", other, n, addr)
			}
		}
		out[n] = addr
	}
	return out, nil
}

// FormatCluster is ParseCluster's inverse, ordered by id.
func FormatCluster(m map[uint64]string) string {
	ids := make([]uint64, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = fmt.Sprintf("%d=%s", id, m[id])
	}
	return strings.Join(parts, ",")
}

// TransportFlags are the command-line settings of a transport, shared by
// kvd, kvctl and kvbench.
type TransportFlags struct {
	Name       string // tcp or rdma
	RDMADevice string // e.g. rxe0, mlx5_0; empty: the first device
	RDMAPoll   string // events or busy
	RDMASpin   time.Duration
	// RDMAAuthFile and RDMAAuthName are --rdma-auth-file and
	// --rdma-auth-name: the rdma transport's key file (rdma.Auth.File) and
	// this end's key in it (rdma.Auth.Name).
	RDMAAuthFile string
	RDMAAuthName string
	// RDMATOS and RDMAAckTimeout are --rdma-tos and --rdma-ack-timeout
	// (RegisterRDMATuning): rdma.Config.TOS and AckTimeout.
	RDMATOS        int
	RDMAAckTimeout time.Duration
	// RDMAAuthRefused, if set (not a flag), hears of every connection the
	// rdma transport refused before it authenticated; default: a warning
	// through slog.Default.
	RDMAAuthRefused func(remote string, err error)
	// TLS, if set (not a flag: see ServerTLSFlags and ClientTLSFlags), runs
	// the tcp transport over TLS; the rdma transport refuses it.
	TLS *tcp.TLS
}

// Register adds --transport, --rdma-device and --rdma-poll to fs.
func (f *TransportFlags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.Name, "transport", "tcp", "transport: tcp or rdma (rdma needs a build with -tags rdma)")
	fs.StringVar(&f.RDMADevice, "rdma-device", "", "RDMA device to use, e.g. mlx5_0 or rxe0 (default: the first one); addresses must be on it")
	fs.StringVar(&f.RDMAPoll, "rdma-poll", "events", "RDMA completion polling: events (completion channel, no idle CPU) or busy (lowest latency, one core spins)")
	fs.DurationVar(&f.RDMASpin, "rdma-spin", 0, "with --rdma-poll events: poll this long for a completion before sleeping (0: the default, 50µs; negative: never)")
	fs.StringVar(&f.RDMAAuthFile, "rdma-auth-file", "", "RDMA: key file, lines NAME:ROLE:HEXKEY with ROLE rw, ro or peer (mode 600); every connection must prove a key in it before it is served or may READ anything (default: no authentication)")
	fs.StringVar(&f.RDMAAuthName, "rdma-auth-name", "", "RDMA: the key in --rdma-auth-file this end proves when it dials; a server's must be a peer key (default: the file's only key)")
}

// RegisterRDMATuning adds --rdma-tos and --rdma-ack-timeout to fs (kvd's
// flags).
func (f *TransportFlags) RegisterRDMATuning(fs *flag.FlagSet) {
	fs.IntVar(&f.RDMATOS, "rdma-tos", 0, "RDMA: type of service of the connections' packets, 0-255 (RoCEv2: DSCP<<2, e.g. 96 for DSCP 24; 0: the device's default)")
	fs.DurationVar(&f.RDMAAckTimeout, "rdma-ack-timeout", 0, "RDMA: queue pairs' local ACK timeout, rounded up to 4.096µs·2^n; with 6 retries it bounds how long a dead peer goes unnoticed (0: the default, 67.1ms, about 0.5s to notice; negative: the connection manager's, seconds)")
}

// Transport makes the transport the flags name. node names this endpoint to
// its peers (a server passes its listen address; clients "").
func (f *TransportFlags) Transport(node string) (transport.Transport, error) {
	switch f.Name {
	case "tcp":
		if f.RDMAAuthFile != "" || f.RDMAAuthName != "" {
			return nil, errors.New("--rdma-auth-file and --rdma-auth-name need --transport rdma (over tcp, use TLS)")
		}
		if f.RDMATOS != 0 || f.RDMAAckTimeout != 0 || f.RDMADevice != "" || f.RDMASpin != 0 ||
			f.RDMAPoll != "" && f.RDMAPoll != "events" {
			return nil, errors.New("--rdma-device, --rdma-poll, --rdma-spin, --rdma-tos and --rdma-ack-timeout need --transport rdma")
		}
		t, err := tcp.New(tcp.Config{Node: node, TLS: f.TLS})
		if err != nil {
			return nil, err
		}
		return t, nil
	case "rdma":
		if f.TLS != nil {
			return nil, errors.New("TLS needs --transport tcp: the rdma transport has no TLS")
		}
		cfg := rdma.Config{Device: f.RDMADevice, SpinPoll: f.RDMASpin, TOS: f.RDMATOS, AckTimeout: f.RDMAAckTimeout}
		switch f.RDMAPoll {
		case "events", "":
			cfg.Poll = rdma.PollEvents
		case "busy":
			cfg.Poll = rdma.PollBusy
		default:
			return nil, fmt.Errorf("--rdma-poll %q: want events or busy", f.RDMAPoll)
		}
		var err error
		if cfg.Auth, err = f.rdmaAuth(node != ""); err != nil {
			return nil, err
		}
		t, err := rdma.New(cfg)
		if err != nil {
			return nil, err
		}
		return t, nil
	}
	return nil, fmt.Errorf("unknown transport %q (want tcp or rdma)", f.Name)
}

// rdmaAuth is the rdma transport's Auth the flags name (nil: none). A
// server dials its peers with its own key, which must be a peer key.
func (f *TransportFlags) rdmaAuth(server bool) (*rdma.Auth, error) {
	if f.RDMAAuthFile == "" {
		if f.RDMAAuthName != "" {
			return nil, errors.New("--rdma-auth-name needs --rdma-auth-file")
		}
		return nil, nil
	}
	refused := f.RDMAAuthRefused
	if refused == nil {
		refused = func(remote string, err error) {
			slog.Warn("rdma: refused a connection that did not authenticate", "remote", remote, "err", err)
		}
	}
	a := &rdma.Auth{File: f.RDMAAuthFile, Name: f.RDMAAuthName, Refused: refused}
	self, ok, err := a.SelfKey()
	switch {
	case err != nil:
		return nil, fmt.Errorf("--rdma-auth-file: %w", err)
	case server && !ok:
		return nil, errors.New("--rdma-auth-name: the file has several keys; name this server's peer key")
	case server && self.Role != rdma.AuthPeer:
		return nil, fmt.Errorf("--rdma-auth-name: key %q has role %v; a server dials its peers with it, so it must be a peer key", self.Name, self.Role)
	case !server && !ok:
		return nil, errors.New("--rdma-auth-name: the file has several keys; name the one to connect with")
	}
	return a, nil
}

// Transport makes the named transport with default settings.
func Transport(name, node string) (transport.Transport, error) {
	f := TransportFlags{Name: name}
	return f.Transport(node)
}

// ServerTLSFlags are kvd's TLS flags: etcd's names, plus
// --read-only-client-cn and --tls-reload-interval.
type ServerTLSFlags struct {
	Files          tlsutil.ServerFiles
	ReadOnlyCN     string        // comma-separated; see Files.ReadOnlyCNs
	ReloadInterval time.Duration // how often the files are checked for changes
}

// Register adds the flags to fs.
func (f *ServerTLSFlags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.Files.CertFile, "cert-file", "", "TLS: certificate (PEM) shown to clients; with --peer-cert-file, turns TLS on for clients and peers")
	fs.StringVar(&f.Files.KeyFile, "key-file", "", "TLS: key (PEM) of --cert-file")
	fs.StringVar(&f.Files.TrustedCAFile, "trusted-ca-file", "", "TLS: CA bundle (PEM) that issues client certificates (with --client-cert-auth)")
	fs.BoolVar(&f.Files.ClientCertAuth, "client-cert-auth", false, "TLS: clients must show a certificate issued by --trusted-ca-file")
	fs.StringVar(&f.Files.PeerCertFile, "peer-cert-file", "", "TLS: certificate (PEM) shown to peers, when they dial this node and when it dials them")
	fs.StringVar(&f.Files.PeerKeyFile, "peer-key-file", "", "TLS: key (PEM) of --peer-cert-file")
	fs.StringVar(&f.Files.PeerTrustedCAFile, "peer-trusted-ca-file", "", "TLS: CA bundle (PEM) that issues the members' peer certificates")
	fs.BoolVar(&f.Files.PeerClientCertAuth, "peer-client-cert-auth", false, "TLS: peers must show a certificate issued by --peer-trusted-ca-file")
	fs.StringVar(&f.ReadOnlyCN, "read-only-client-cn", "", "TLS: comma-separated client certificate common names that may only read (as may certificates with OU="+tlsutil.ReadOnlyOU+"); needs --client-cert-auth")
	fs.DurationVar(&f.ReloadInterval, "tls-reload-interval", tlsutil.DefaultPoll, "TLS: how often to check the files for changes and reload them (0: only on SIGHUP, which always reloads at once)")
}

// ServerFiles returns the files and settings the flags name.
func (f *ServerTLSFlags) ServerFiles() tlsutil.ServerFiles {
	files := f.Files
	files.ReadOnlyCNs = nil
	for _, cn := range strings.Split(f.ReadOnlyCN, ",") {
		if cn = strings.TrimSpace(cn); cn != "" {
			files.ReadOnlyCNs = append(files.ReadOnlyCNs, cn)
		}
	}
	return files
}

// ClientTLSFlags are a client's TLS flags: etcdctl's --cacert, --cert and
// --key.
type ClientTLSFlags struct {
	Files tlsutil.ClientFiles
}

// Register adds the flags to fs.
func (f *ClientTLSFlags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.Files.CACert, "cacert", "", "TLS: CA bundle (PEM) that verifies the servers; any TLS flag turns TLS on")
	fs.StringVar(&f.Files.Cert, "cert", "", "TLS: client certificate (PEM), for servers with --client-cert-auth")
	fs.StringVar(&f.Files.Key, "key", "", "TLS: key (PEM) of --cert")
}

// TLS loads the files the flags name: nil if none is named. Errors name
// the flag.
func (f *ClientTLSFlags) TLS() (*tcp.TLS, error) {
	if !f.Files.Enabled() {
		return nil, nil
	}
	st, err := tlsutil.NewClient(f.Files)
	if err != nil {
		return nil, fmt.Errorf("TLS: %w", err)
	}
	return st.TCP(), nil
}
