package main

import (
	"flag"
	"fmt"
	"log/slog"
	"net"
	"strings"

	"github.com/kvd-project/kvd/internal/tlsutil"
	"github.com/kvd-project/kvd/transport"
)

// peerListen is --listen-peer and its etcd spelling --listen-peer-urls:
// the address the node listens on for peers, apart from its clients'
// (--listen).
type peerListen struct {
	addr   string
	flag   string // the flag that set it
	scheme string // http or https, if --listen-peer-urls gave one
}

// registerPeerListen adds --listen-peer and --listen-peer-urls to fs.
func registerPeerListen(fs *flag.FlagSet, p *peerListen) {
	fs.Func("listen-peer", "address for peers (host:port), apart from clients' --listen; --initial-cluster then names peer addresses (empty: --listen takes both)",
		func(v string) error { return p.set("listen-peer", v) })
	fs.Func("listen-peer-urls", "etcd's spelling of --listen-peer: one http://HOST:PORT or https://HOST:PORT (https: with peer TLS) or HOST:PORT",
		func(v string) error { return p.set("listen-peer-urls", v) })
}

func (p *peerListen) set(name, v string) error {
	if p.flag != "" && p.flag != name {
		return fmt.Errorf("--%s and --%s name the same setting: give one", p.flag, name)
	}
	p.flag, p.addr, p.scheme = name, v, ""
	if name != "listen-peer-urls" {
		return nil
	}
	if strings.Contains(v, ",") {
		return fmt.Errorf("%q: kvd listens for peers on one address; give one URL", v)
	}
	if scheme, rest, ok := strings.Cut(v, "://"); ok {
		if scheme != "http" && scheme != "https" {
			return fmt.Errorf("%q: want http://HOST:PORT, https://HOST:PORT or HOST:PORT", v)
		}
		p.scheme, p.addr = scheme, strings.TrimSuffix(rest, "/")
	}
	return nil
}

// checkPeerListen refuses a peer address that is no host:port, is the
// client address, or whose --listen-peer-urls scheme says the opposite of
// the peer TLS flags.
func checkPeerListen(o *options) error {
	p := o.peerListen
	if p.addr == "" {
		return nil
	}
	if _, port, err := net.SplitHostPort(p.addr); err != nil || port == "" {
		return fmt.Errorf("--%s %q: want host:port", p.flag, p.addr)
	}
	if o.transport.Name == "tcp" && sharePort(p.addr, o.cfg.Listen) && !strings.HasSuffix(p.addr, ":0") {
		return fmt.Errorf("--%s %q and --listen %q are one port: peers need an address of their own", p.flag, p.addr, o.cfg.Listen)
	}
	if o.metricsListen != "" && o.transport.Name == "tcp" && sharePort(o.metricsListen, p.addr) {
		return fmt.Errorf("--metrics-listen %q and --%s %q are one port", o.metricsListen, p.flag, p.addr)
	}
	peerTLS := o.tls.Files.PeerCertFile != ""
	switch {
	case p.scheme == "https" && !peerTLS:
		return fmt.Errorf("--listen-peer-urls https://%s needs peer TLS: give --peer-cert-file/--peer-key-file/--peer-trusted-ca-file, or say http://", p.addr)
	case p.scheme == "http" && peerTLS:
		return fmt.Errorf("--listen-peer-urls http://%s with --peer-cert-file: peer TLS is on, so say https://", p.addr)
	}
	return nil
}

// transports makes the node's transports: one for everything, or, with a
// peer listener over tcp, one for clients (with client TLS, if any) and
// one for peers (with peer TLS, if any), so that each may speak TLS or
// not. Over rdma, which has no TLS, both listeners share one transport
// (peer is nil then, as without a peer listener). It loads the TLS
// material (setupTLS); stop ends its reloading.
func transports(o *options, log *slog.Logger) (client, peer transport.Transport, stop func(), err error) {
	certs, stop, err := setupTLS(o, log)
	if err != nil {
		return nil, nil, nil, err
	}
	split := o.cfg.ListenPeer != "" && o.transport.Name == "tcp"
	if certs != nil {
		o.transport.TLS = certs.TCP()
		if split {
			o.transport.TLS = certs.ClientTCP()
		}
	}
	if client, err = o.transport.Transport(o.cfg.Listen); err != nil {
		stop()
		return nil, nil, nil, fmt.Errorf("--transport: %w", err)
	}
	if !split {
		return client, nil, stop, nil
	}
	o.transport.TLS = nil
	if certs != nil {
		o.transport.TLS = certs.PeerTCP()
	}
	if peer, err = o.transport.Transport(o.cfg.ListenPeer); err != nil {
		client.Close()
		stop()
		return nil, nil, nil, fmt.Errorf("--transport: %w", err)
	}
	return client, peer, stop, nil
}

// tlsSummary says which listeners speak TLS, for the start-up log.
func tlsSummary(f tlsutil.ServerFiles) string {
	switch {
	case !f.PeerListener:
		return "TLS on for clients and peers"
	case f.CertFile != "" && f.PeerCertFile != "":
		return "TLS on for clients (--listen) and peers (--listen-peer)"
	case f.CertFile != "":
		return "TLS on for clients (--listen); peers (--listen-peer) speak plaintext"
	}
	return "TLS on for peers (--listen-peer); clients (--listen) speak plaintext"
}
