package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"

	"github.com/kvd-project/kvd/bench/respfloor"
)

// respFloorCmd is "kvbench resp-floor": the go-floor target of "kvbench
// redis" (bench/respfloor), a minimal Go server of Redis' protocol, as a
// process of its own so that its CPU is measured as a server's is.
func respFloorCmd(ctx context.Context, args []string) error {
	var listen string
	fs := flag.NewFlagSet("kvbench resp-floor", flag.ContinueOnError)
	fs.StringVar(&listen, "listen", "127.0.0.1:6380", "address to serve RESP on")
	if err := parse(fs, args, false); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "kvbench resp-floor: serving on %s\n", ln.Addr())
	return respfloor.NewServer().Serve(ctx, ln)
}
