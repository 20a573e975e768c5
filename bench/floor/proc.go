package floor

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"strings"
)

// NodeArgs are the arguments of one node process, for RunNode.
// With keys above 0 the node logs to a Pebble database (PebbleLog) in the
// directory log, writing values over that many keys; with state too, it
// logs to the file log and writes the state to Pebble (StateLog).
func NodeArgs(leader bool, log string, followers []string, sync bool, keys int, state bool) []string {
	return []string{
		fmt.Sprintf("--state=%t", state),
		fmt.Sprintf("--leader=%t", leader),
		"--log", log,
		"--followers", strings.Join(followers, ","),
		fmt.Sprintf("--sync=%t", sync),
		fmt.Sprintf("--pebble-keys=%d", keys),
	}
}

// RunNode is a node process's body: it listens on a loopback port, prints
// the address as its first line on out, and serves until ctx ends or its
// connections fail.
func RunNode(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("floor node", flag.ContinueOnError)
	leader := fs.Bool("leader", false, "lead (else follow)")
	logPath := fs.String("log", "", "log file")
	followers := fs.String("followers", "", "followers' addresses, comma-separated (leader)")
	sync := fs.Bool("sync", true, "fdatasync every batch")
	keys := fs.Int("pebble-keys", 0, "log to Pebble, writing values over this many keys (0: a plain file)")
	state := fs.Bool("state", false, "with --pebble-keys: log to the plain file, and write the state to Pebble")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *logPath == "" {
		return fmt.Errorf("%w: --log is required", ErrConfig)
	}
	var log Appender
	var err error
	switch {
	case *keys > 0 && *state:
		log, err = OpenStateLog(*logPath, *keys, *sync)
	case *keys > 0:
		log, err = OpenPebbleLog(*logPath, *keys, *sync)
	default:
		log, err = OpenLog(*logPath, *sync)
	}
	if err != nil {
		return err
	}
	defer log.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	defer ln.Close()
	if !*leader {
		fmt.Fprintln(out, ln.Addr())
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		defer c.Close()
		return Follow(c, log)
	}
	var conns []net.Conn
	for _, a := range strings.Split(*followers, ",") {
		if a == "" {
			continue
		}
		c, err := net.Dial("tcp", a)
		if err != nil {
			return err
		}
		conns = append(conns, c)
	}
	l := NewLeader(log, conns)
	defer l.Close()
	fmt.Fprintln(out, ln.Addr())
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				l.Close()
				return
			}
			go l.ServeClient(c)
		}
	}()
	return l.Serve()
}
