package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/cli"
	"github.com/kvd-project/kvd/internal/tlsutil"
	"github.com/kvd-project/kvd/transport/rdma"
)

// checkNodeEtcd checks a node's etcd flags (TLS follows --cert-file, as
// for kvd's own clients) and the ports they name against the node's
// others.
func checkNodeEtcd(o *options) error {
	urls, err := o.etcd.check(o.tls.Files.CertFile != "")
	if err != nil {
		return err
	}
	for _, u := range urls {
		if o.transport.Name == "tcp" && sharePort(u.addr, o.cfg.Listen) {
			return fmt.Errorf("--listen-client-urls %s and --listen %q are one port: etcd's API needs a port of its own", u.addr, o.cfg.Listen)
		}
		if o.metricsListen != "" && sharePort(u.addr, o.metricsListen) {
			return fmt.Errorf("--listen-client-urls %s and --metrics-listen %q are one port", u.addr, o.metricsListen)
		}
	}
	o.etcdURLs = urls
	return nil
}

// nodeEtcdEndpoints are the addresses the node's etcd API reaches its
// cluster through: its own first, then its peers' when they share their
// client address (no --listen-peer).
func nodeEtcdEndpoints(o *options) []string {
	eps := []string{dialable(o.cfg.Listen)}
	if o.cfg.ListenPeer != "" {
		return eps
	}
	ids := make([]uint64, 0, len(o.cfg.InitialCluster))
	for id := range o.cfg.InitialCluster {
		if id != o.cfg.ID {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		eps = append(eps, o.cfg.InitialCluster[id])
	}
	return eps
}

// serveNodeEtcd serves etcd's API on the bound front with a client of the
// node's own cluster. Over TLS the client shows the node's client
// certificate (--cert-file) and verifies with --trusted-ca-file, as
// etcd's own gateway does, so kvd's rules for certificates apply to it;
// each etcd client's own certificate is checked on the etcd listener.
func serveNodeEtcd(f *etcdFront, o *options, log *slog.Logger) error {
	var files *tlsutil.ClientFiles
	if o.tls.Files.CertFile != "" {
		files = &tlsutil.ClientFiles{CACert: o.tls.Files.TrustedCAFile, Cert: o.tls.Files.CertFile, Key: o.tls.Files.KeyFile}
	}
	kc, closeTr, err := newFrontClient(frontTransport(o), files, client.Config{
		Endpoints:  nodeEtcdEndpoints(o),
		LeaseDrift: o.cfg.LeaseDrift,
	})
	if err != nil {
		return err
	}
	return f.serve(&o.etcd, kc, closeTr, o.cfg.ID, o.certs, log)
}

// frontTransport is the transport the node's own etcd and Redis fronts
// reach the cluster over: the node's, dialling with --rdma-auth-client-name
// rather than the node's peer key, on which servers refuse client
// requests.
func frontTransport(o *options) cli.TransportFlags {
	tf := o.transport
	if tf.RDMAAuthFile != "" {
		tf.RDMAAuthName = o.frontKey
	}
	return tf
}

// checkFrontKey checks --rdma-auth-client-name: with --rdma-auth-file, a
// node serving etcd's API or Redis' protocol names a client key (rw, or ro
// for read-only fronts) for them to connect with.
func checkFrontKey(o *options) error {
	fronts := len(splitList(o.etcd.listen)) > 0 || o.redis.listen != ""
	switch {
	case o.frontKey == "" && fronts && o.transport.RDMAAuthFile != "":
		return errors.New("--rdma-auth-file with --listen-client-urls or --redis-listen needs --rdma-auth-client-name: " +
			"the rw (or ro) key they connect to the cluster with (the node's own key is a peer key, which servers refuse client requests on)")
	case o.frontKey == "":
		return nil
	case o.transport.RDMAAuthFile == "":
		return errors.New("--rdma-auth-client-name needs --rdma-auth-file")
	case !fronts:
		return errors.New("--rdma-auth-client-name is the key of --listen-client-urls and --redis-listen, and neither is set")
	}
	a := rdma.Auth{File: o.transport.RDMAAuthFile, Name: o.frontKey}
	k, _, err := a.SelfKey()
	if err != nil {
		return fmt.Errorf("--rdma-auth-client-name: %w", err)
	}
	if k.Role == rdma.AuthPeer {
		return fmt.Errorf("--rdma-auth-client-name: key %q is a peer key, which servers refuse client requests on; name an rw or ro key", k.Name)
	}
	return nil
}

// newFrontClient makes the kvd client behind an etcd front, over the
// transport tf names (its TLS replaced by files', if any). closeTr closes
// the transport when the client does not own it (nil when it does).
func newFrontClient(tf cli.TransportFlags, files *tlsutil.ClientFiles, cfg client.Config) (kc *client.Client, closeTr func() error, err error) {
	tf.TLS = nil
	var tlsCfg *tls.Config
	if files != nil {
		st, err := tlsutil.NewClient(*files)
		if err != nil {
			return nil, nil, fmt.Errorf("TLS: %w", err)
		}
		tlsCfg = st.ClientConfig()
	}
	if tf.Name == "tcp" {
		cfg.TLS = tlsCfg
		kc, err = client.New(cfg)
		return kc, nil, err
	}
	tr, err := tf.Transport("")
	if err != nil {
		return nil, nil, fmt.Errorf("--transport: %w", err)
	}
	cfg.Transport = tr
	if kc, err = client.New(cfg); err != nil {
		tr.Close()
		return nil, nil, err
	}
	return kc, tr.Close, nil
}
