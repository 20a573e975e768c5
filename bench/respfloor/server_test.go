package respfloor

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// cmd encodes args as a RESP array of bulk strings, as redis-benchmark
// sends commands.
func cmd(args ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.String()
}

// TestServeAnswers: each input, served on a fresh server, gets exactly
// these replies; a malformed request gets an error reply and ends the
// connection with a protocolError, never a panic.
func TestServeAnswers(t *testing.T) {
	const pong = "+PONG\r\n"
	for _, tc := range []struct {
		name, in, want string
		err            error // nil, errProto (any protocolError) or io.ErrUnexpectedEOF
	}{
		{"GET miss", cmd("GET", "k"), "$-1\r\n", nil},
		{"SET then GET hit", cmd("SET", "k", "v") + cmd("get", "k"), "+OK\r\n$1\r\nv\r\n", nil},
		{"SET an empty value", cmd("SET", "k", "") + cmd("GET", "k"), "+OK\r\n$0\r\n\r\n", nil},
		{"SET overwrites", cmd("SET", "k", "a") + cmd("SET", "k", "bc") + cmd("GET", "k"), "+OK\r\n+OK\r\n$2\r\nbc\r\n", nil},
		{"SET with options", cmd("SET", "k", "v", "EX", "1"), "-ERR syntax error\r\n", nil},
		{"GET without a key", cmd("GET"), "-ERR wrong number of arguments for 'get' command\r\n", nil},
		{"PING", cmd("PING"), pong, nil},
		{"inline PING", "PING\r\nping\n", pong + pong, nil},
		{"PING a message", cmd("PING", "hi"), "$2\r\nhi\r\n", nil},
		{"INCR a new key, twice", cmd("INCR", "n") + cmd("incr", "n") + cmd("GET", "n"), ":1\r\n:2\r\n$1\r\n2\r\n", nil},
		{"INCR a set number", cmd("SET", "n", "-5") + cmd("INCR", "n"), "+OK\r\n:-4\r\n", nil},
		{"INCR a non-number", cmd("SET", "n", "x") + cmd("INCR", "n"), "+OK\r\n-ERR value is not an integer or out of range\r\n", nil},
		{"INCR past the maximum", cmd("SET", "n", "9223372036854775807") + cmd("INCR", "n"),
			"+OK\r\n-ERR increment or decrement would overflow\r\n", nil},
		{"MSET", cmd("MSET", "a", "1", "b", "2") + cmd("GET", "a") + cmd("GET", "b"), "+OK\r\n$1\r\n1\r\n$1\r\n2\r\n", nil},
		{"MSET without a value", cmd("MSET", "a", "1", "b"), "-ERR wrong number of arguments for 'mset' command\r\n", nil},
		{"CONFIG GET save", cmd("CONFIG", "GET", "save"), "*2\r\n$4\r\nsave\r\n$0\r\n\r\n", nil},
		{"CONFIG GET appendonly", cmd("config", "get", "appendonly"), "*2\r\n$10\r\nappendonly\r\n$2\r\nno\r\n", nil},
		{"CONFIG GET another", cmd("CONFIG", "GET", "maxmemory"), "*0\r\n", nil},
		{"CONFIG SET", cmd("CONFIG", "SET", "save", ""), "-ERR CONFIG: only CONFIG GET parameter is served\r\n", nil},
		{"unknown, then served on", cmd("FLUSHALL") + cmd("PING"), "-ERR unknown command \"FLUSHALL\"\r\n" + pong, nil},
		{"unknown with CRLF in its name", cmd("X\r\nY"), "-ERR unknown command \"X\\r\\nY\"\r\n", nil},
		{"empty commands", "*0\r\n\r\n" + cmd("PING"), pong, nil},
		{"bad array length", "*x\r\n", "-ERR Protocol error: invalid multibulk length\r\n", errProto},
		{"null array", "*-1\r\n", "-ERR Protocol error: invalid multibulk length\r\n", errProto},
		{"too many arguments", fmt.Sprintf("*%d\r\n", maxArgs+1), "-ERR Protocol error: invalid multibulk length\r\n", errProto},
		{"not a bulk string", "*2\r\n$3\r\nGET\r\n:1\r\n", "-ERR Protocol error: expected '$'\r\n", errProto},
		{"bulk too long", fmt.Sprintf("*1\r\n$%d\r\n", maxBulk+1), "-ERR Protocol error: invalid bulk length\r\n", errProto},
		{"null bulk", "*1\r\n$-1\r\n", "-ERR Protocol error: invalid bulk length\r\n", errProto},
		{"bulk longer than said", "*1\r\n$4\r\nPINGPONG\r\n", "-ERR Protocol error: bulk not followed by CRLF\r\n", errProto},
		{"line too long", strings.Repeat("a", readBufSize+1), "-ERR Protocol error: too big line\r\n", errProto},
		{"replies before the bad request", cmd("PING") + "*?\r\n", pong + "-ERR Protocol error: invalid multibulk length\r\n", errProto},
		{"cut off in the header", "*2\r\n$3\r\nGET\r\n", "", io.ErrUnexpectedEOF},
		{"cut off in a bulk", "*1\r\n$4\r\nPI", "", io.ErrUnexpectedEOF},
		{"cut off in a line", "PIN", "", io.ErrUnexpectedEOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := NewServer().serve(strings.NewReader(tc.in), &out)
			if got := out.String(); got != tc.want {
				t.Errorf("replies %q, want %q", got, tc.want)
			}
			var pe protocolError
			switch {
			case tc.err == errProto && !errors.As(err, &pe):
				t.Errorf("error %v, want a protocol error", err)
			case tc.err != errProto && !errors.Is(err, tc.err):
				t.Errorf("error %v, want %v", err, tc.err)
			}
		})
	}
}

// errProto stands for any protocolError in TestServeAnswers.
var errProto = errors.New("a protocol error")

// writes counts the writes made to it.
type writes struct {
	bytes.Buffer
	n int
}

func (w *writes) Write(p []byte) (int, error) {
	w.n++
	return w.Buffer.Write(p)
}

// TestServeFlushesWhenNothingIsBuffered: the replies to a pipeline that
// arrived in one read leave in one write.
func TestServeFlushesWhenNothingIsBuffered(t *testing.T) {
	var out writes
	in := strings.Repeat(cmd("SET", "k", "v")+cmd("GET", "k"), 16)
	if err := NewServer().serve(strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	if want := strings.Repeat("+OK\r\n$1\r\nv\r\n", 16); out.String() != want || out.n != 1 {
		t.Errorf("%d writes of %q, want one of %q", out.n, out.String(), want)
	}
}

// TestServeOverTCP: concurrent connections share the keys, and Serve
// returns nil once its context ends.
func TestServeOverTCP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- NewServer().Serve(ctx, ln) }()
	const conns = 8
	var wg sync.WaitGroup
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := roundTrip(ln.Addr().String(), cmd("INCR", "n")+cmd("SET", fmt.Sprint("k", i), "v"), ":"); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if err := roundTrip(ln.Addr().String(), cmd("GET", "n"), fmt.Sprintf("$1\r\n%d\r\n", conns)); err != nil {
		t.Error(err)
	}
	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve = %v after its context ended", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
}

// roundTrip sends req on a new connection and checks that the reply
// starts with want.
func roundTrip(addr, req, want string) error {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		return err
	}
	got := make([]byte, len(want))
	if _, err := io.ReadFull(bufio.NewReader(c), got); err != nil {
		return err
	}
	if string(got) != want {
		return fmt.Errorf("reply %q, want %q", got, want)
	}
	return nil
}
