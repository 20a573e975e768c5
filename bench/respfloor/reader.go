package respfloor

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"slices"
)

// Bounds on what a request may declare, so that a bad or hostile client
// costs a bounded amount of memory.
const (
	// maxArgs bounds a command's arguments (redis-benchmark's MSET sends
	// 21).
	maxArgs = 1024
	// maxBulk bounds one argument's bytes: kvbench redis' largest value
	// (--data-size 1 MiB).
	maxBulk = 1 << 20
	// readBufSize is the reader's buffer, which bounds a length line or an
	// inline command.
	readBufSize = 16 << 10
)

// protocolError is a request the parser refuses; the connection is
// answered with it and closed, as Redis does.
type protocolError string

func (e protocolError) Error() string { return "Protocol error: " + string(e) }

// reader parses requests: RESP arrays of bulk strings, and inline
// commands (a line of words, as redis-benchmark's PING_INLINE sends).
type reader struct {
	br *bufio.Reader
	// buf holds the current command's arguments back to back; ends are
	// where each one ends in it.
	buf  []byte
	ends []int
	args [][]byte
}

func newReader(r io.Reader) *reader {
	return &reader{br: bufio.NewReaderSize(r, readBufSize)}
}

// next reads one command. Its arguments are valid until the next call. An
// empty command (a blank line, "*0") is no arguments and no error; a
// malformed one is a protocolError; a cut-off one is
// io.ErrUnexpectedEOF.
func (r *reader) next() ([][]byte, error) {
	line, err := r.line()
	if err != nil {
		return nil, err
	}
	if len(line) == 0 || line[0] != '*' {
		args := bytes.Fields(line)
		if len(args) > maxArgs {
			return nil, protocolError("too many arguments")
		}
		return args, nil
	}
	n, ok := parseLen(line[1:])
	if !ok || n > maxArgs {
		return nil, protocolError("invalid multibulk length")
	}
	r.buf, r.ends = r.buf[:0], r.ends[:0]
	for range n {
		if err := r.bulk(); err != nil {
			return nil, err
		}
	}
	r.args = r.args[:0]
	start := 0
	for _, end := range r.ends {
		r.args = append(r.args, r.buf[start:end:end])
		start = end
	}
	return r.args, nil
}

// line reads a line without its "\r\n" (or "\n"); the slice is valid
// until the next read.
func (r *reader) line() ([]byte, error) {
	line, err := r.br.ReadSlice('\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull):
		return nil, protocolError("too big line")
	case err == io.EOF && len(line) > 0:
		return nil, io.ErrUnexpectedEOF
	case err != nil:
		return nil, err
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, nil
}

// bulk reads one "$n\r\n" and its n bytes and "\r\n" onto buf.
func (r *reader) bulk() error {
	line, err := r.line()
	if err != nil {
		return unexpected(err)
	}
	if len(line) == 0 || line[0] != '$' {
		return protocolError("expected '$'")
	}
	n, ok := parseLen(line[1:])
	if !ok || n > maxBulk {
		return protocolError("invalid bulk length")
	}
	start := len(r.buf)
	r.buf = slices.Grow(r.buf, n+2)[:start+n+2]
	if _, err := io.ReadFull(r.br, r.buf[start:]); err != nil {
		return unexpected(err)
	}
	if r.buf[start+n] != '\r' || r.buf[start+n+1] != '\n' {
		return protocolError("bulk not followed by CRLF")
	}
	r.buf = r.buf[:start+n]
	r.ends = append(r.ends, start+n)
	return nil
}

// unexpected is err where a command has begun: an end of input there
// cuts the command off.
func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// parseLen parses a decimal length of at most 9 digits, which no bound
// reaches; a sign (a null array or bulk string) is refused.
func parseLen(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 9 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}
