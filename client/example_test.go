package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/server"
	"github.com/kvd-project/kvd/transport/tcp"
)

func Example() {
	endpoint, stop := startExampleNode() // a one-node kvd in this process
	defer stop()

	c, err := client.New(client.Config{Endpoints: []string{endpoint}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx := context.Background()
	if err := c.Put(ctx, []byte("hello"), []byte("world")); err != nil {
		log.Fatal(err)
	}
	v, err := c.Get(ctx, []byte("hello")) // one-sided: READs of the server's table
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s\n", v)

	_, err = c.Get(ctx, []byte("missing"))
	fmt.Println(errors.Is(err, client.ErrNotFound))
	// Output:
	// world
	// true
}

// startExampleNode runs a single kvd node on a loopback port; it is what
// `kvd --data-dir DIR` does.
func startExampleNode() (string, func()) {
	dir, err := os.MkdirTemp("", "kvd-example-")
	if err != nil {
		log.Fatal(err)
	}
	tr, err := tcp.New(tcp.Config{})
	if err != nil {
		log.Fatal(err)
	}
	srv, err := server.New(server.Config{
		Listen: "127.0.0.1:0", DataDir: dir, Transport: tr, TableMem: 1 << 20,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		log.Fatal(err)
	}
	return srv.Addr(), func() { srv.Close(); tr.Close(); os.RemoveAll(dir) }
}
