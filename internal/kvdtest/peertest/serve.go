package peertest

import (
	"context"
	"log/slog"
	"os"
	"sync"

	"github.com/kvd-project/kvd/transport"
)

// AcceptPeers is the part of the server's accept loop a raft node needs:
// a connection whose first message is a peer hello (isHello) goes to
// serve, any other is closed. It returns when ln stops accepting (ctx
// ended or ln closed), after every serve has returned.
func AcceptPeers(ctx context.Context, ln transport.Listener, isHello func([]byte) bool, serve func(transport.Conn, []byte)) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		conn, err := ln.Accept(ctx)
		if err != nil {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			first, err := conn.Recv(ctx, nil)
			if err != nil || !isHello(first) {
				conn.Close()
				return
			}
			serve(conn, first)
		}()
	}
}

// Logger is the nodes' logger in tests: silent, unless RAFT_DEBUG is set
// in the environment, then Info and above on stderr.
func Logger() *slog.Logger {
	if os.Getenv("RAFT_DEBUG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return slog.New(slog.DiscardHandler)
}
