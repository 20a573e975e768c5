package server

import (
	"context"
	"fmt"
	"net"

	"github.com/kvd-project/kvd/internal/wire"
	"github.com/kvd-project/kvd/transport"
)

// listenRole is what a listener's connections may carry.
type listenRole uint8

const (
	// listenBoth: clients and peers on one listener (no ListenPeer); the
	// first message tells them apart.
	listenBoth listenRole = iota
	// listenClients: the client listener of a node that has a peer one.
	listenClients
	// listenPeers: the peer listener.
	listenPeers
)

// listenRole is the role of the client listener.
func (s *Server) listenRole() listenRole {
	if s.peerLn == nil {
		return listenBoth
	}
	return listenClients
}

// clientAddr is the address this node gives clients for itself when it
// leads, and announces to its peers for them to give: with a peer
// listener, where it listens for clients, with an unspecified host (such
// as 0.0.0.0) taken from its member address, which peers reach it at.
// Without one, "": clients use the member address, as peers do.
func (s *Server) clientAddr() string {
	if s.peerLn == nil {
		return ""
	}
	host, port, err := net.SplitHostPort(s.ln.Addr()) // the port, even if Listen said 0
	if err != nil {
		return s.ln.Addr()
	}
	if lh, _, err := net.SplitHostPort(s.cfg.Listen); err == nil && !anyHost(lh) {
		host = lh
	} else if mh, _, err := net.SplitHostPort(s.cfg.memberAddr()); err == nil {
		host = mh
	}
	return net.JoinHostPort(host, port)
}

// anyHost reports whether a listen address's host takes every address.
func anyHost(h string) bool {
	ip := net.ParseIP(h)
	return h == "" || (ip != nil && ip.IsUnspecified())
}

// refuseWrongListener refuses, counts and logs (rate-limited) a
// connection that came to the listener of the other kind: a peer's to the
// client listener, a client's to the peer listener. A client is told
// where to go instead, in a reply to its first request; a peer only
// redials, so the log on this end is what tells the operator. It reports
// whether conn was refused.
func (s *Server) refuseWrongListener(conn transport.Conn, role listenRole, peer bool, first []byte) bool {
	switch {
	case role == listenClients && peer:
		s.connRefused(transport.ReasonWrongListener, conn.RemoteAddr(),
			fmt.Errorf("a peer hello on the client listener %s: members dial this node's peer address %s (--listen-peer), as --initial-cluster names it",
				s.ln.Addr(), s.cfg.memberAddr()))
		return true
	case role == listenPeers && !peer:
		s.connRefused(transport.ReasonWrongListener, conn.RemoteAddr(),
			fmt.Errorf("a client on the peer listener %s: clients connect to %s (--listen)", s.peerLn.Addr(), s.clientAddr()))
		s.tellClientWrongListener(conn, first)
		return true
	}
	return false
}

// tellClientWrongListener answers a client's first request on the peer
// listener with where to connect instead.
func (s *Server) tellClientWrongListener(conn transport.Conn, first []byte) {
	var req wire.Request
	if wire.DecodeRequest(first, &req) != nil {
		return
	}
	resp := badRequest(fmt.Sprintf("%s is kvd node %d's peer address; clients connect to %s", s.peerLn.Addr(), s.cfg.ID, s.clientAddr()))
	resp.Op, resp.ID = req.Op, req.ID
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.Knobs.ReplyTimeout)
	defer cancel()
	_ = conn.Send(ctx, wire.AppendResponse(nil, &resp))
}
