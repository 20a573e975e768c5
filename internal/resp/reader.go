package resp

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strconv"

	"github.com/kvd-project/kvd/internal/limits"
)

// Defaults for Limits, Redis' own where kvd has no tighter reason.
const (
	// DefaultMaxArgs is the most arguments one command may have: Redis'
	// multibulk bound (1024*1024).
	DefaultMaxArgs = 1 << 20
	// DefaultMaxInline is the longest inline command: Redis'
	// PROTO_INLINE_MAX_SIZE.
	DefaultMaxInline = 64 << 10
	// MaxBulk is the longest bulk string a request may carry: kvd's value
	// limit stands for Redis' 512 MiB proto-max-bulk-len, since no
	// argument longer than a value can be stored.
	MaxBulk = limits.MaxValue
	// DefaultMaxRequestBytes bounds one command's arguments together:
	// a transaction's worth (an MSET of the largest value), since kvd
	// applies nothing larger in one entry.
	DefaultMaxRequestBytes = limits.MaxTxnBytes + 64<<10
)

// Limits bound what one request may hold. Zero fields take the defaults.
type Limits struct {
	MaxArgs         int // arguments of one command
	MaxInline       int // bytes of one inline command line
	MaxRequestBytes int // bytes of one command's arguments together
}

// WithDefaults fills the zero fields of l.
func (l Limits) WithDefaults() Limits {
	if l.MaxArgs == 0 {
		l.MaxArgs = DefaultMaxArgs
	}
	if l.MaxInline == 0 {
		l.MaxInline = DefaultMaxInline
	}
	if l.MaxRequestBytes == 0 {
		l.MaxRequestBytes = DefaultMaxRequestBytes
	}
	return l
}

// ProtocolError is a request the Reader refused; Redis replies "ERR
// Protocol error: <Msg>" and closes the connection. Reason is a short
// stable label for metrics.
type ProtocolError struct {
	Reason string
	Msg    string
}

func (e *ProtocolError) Error() string { return "Protocol error: " + e.Msg }

// Refusal reasons (metric labels).
const (
	ReasonSyntax    = "syntax"
	ReasonArgs      = "too_many_args"
	ReasonBulk      = "bulk_too_large"
	ReasonInline    = "inline_too_large"
	ReasonRequest   = "request_too_large"
	ReasonQuotes    = "unbalanced_quotes"
	ReasonEmptyLine = "empty"
)

func protoErr(reason, msg string) error { return &ProtocolError{Reason: reason, Msg: msg} }

// Reader parses commands from a connection.
type Reader struct {
	br  *bufio.Reader
	lim Limits
}

// NewReader reads commands from r within lim (defaults filled).
func NewReader(r io.Reader, lim Limits) *Reader {
	return &Reader{br: bufio.NewReaderSize(r, 16<<10), lim: lim.WithDefaults()}
}

// Buffered is how many bytes were read from the connection but not yet
// parsed: more pipelined commands are waiting when it is above 0.
func (r *Reader) Buffered() int { return r.br.Buffered() }

// ReadCommand returns the next command's arguments (at least one). An
// empty inline line is skipped, as Redis does. Errors are io errors or a
// *ProtocolError.
func (r *Reader) ReadCommand() ([][]byte, error) {
	for {
		b, err := r.br.Peek(1)
		if err != nil {
			return nil, err
		}
		var args [][]byte
		if b[0] == '*' {
			args, err = r.readMultibulk()
		} else {
			args, err = r.readInline()
		}
		if err != nil || len(args) > 0 {
			return args, err
		}
	}
}

// readLine returns one CRLF-terminated line without its terminator, at
// most max bytes long (beyond that, a ProtocolError with reason and
// tooLong). With keep the line is a copy of its own; without, a line that
// arrived whole in the read buffer is returned in place, valid only until
// the next read (the length lines, parsed at once: no allocation).
func (r *Reader) readLine(max int, keep bool, reason, tooLong string) ([]byte, error) {
	var line []byte
	for {
		frag, err := r.br.ReadSlice('\n')
		if len(line)+len(frag) > max+2 {
			return nil, protoErr(reason, tooLong)
		}
		if err == nil && line == nil && !keep {
			line = frag
			break
		}
		line = append(line, frag...)
		if err == nil {
			break
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			if err == io.EOF && len(line) > 0 {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, nil
}

// readMultibulk reads "*<n>\r\n" and n bulk strings, as Redis'
// processMultibulkBuffer accepts them.
func (r *Reader) readMultibulk() ([][]byte, error) {
	line, err := r.readLine(32, false, ReasonSyntax, "too big mbulk count string")
	if err != nil {
		return nil, err
	}
	n, ok := parseLen(line[1:])
	if !ok || n > int64(r.lim.MaxArgs) {
		if ok {
			return nil, protoErr(ReasonArgs, "invalid multibulk length")
		}
		return nil, protoErr(ReasonSyntax, "invalid multibulk length")
	}
	if n <= 0 {
		return nil, nil // Redis ignores "*0" and "*-1"
	}
	args := make([][]byte, 0, min(n, 64))
	total := 0
	for i := int64(0); i < n; i++ {
		line, err := r.readLine(32, false, ReasonSyntax, "too big bulk count string")
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		if err != nil {
			return nil, err
		}
		if len(line) == 0 || line[0] != '$' {
			got := byte(' ')
			if len(line) > 0 {
				got = line[0]
			}
			return nil, protoErr(ReasonSyntax, "expected '$', got '"+string(got)+"'")
		}
		l, ok := parseLen(line[1:])
		if !ok || l < 0 {
			return nil, protoErr(ReasonSyntax, "invalid bulk length")
		}
		if l > MaxBulk {
			return nil, protoErr(ReasonBulk, "invalid bulk length")
		}
		if total += int(l); total > r.lim.MaxRequestBytes {
			return nil, protoErr(ReasonRequest, "request too large")
		}
		arg := make([]byte, l+2)
		if _, err := io.ReadFull(r.br, arg); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		if arg[l] != '\r' || arg[l+1] != '\n' {
			return nil, protoErr(ReasonSyntax, "invalid bulk format")
		}
		args = append(args, arg[:l:l])
	}
	return args, nil
}

// parseLen parses a decimal length as Redis' string2ll does (an optional
// minus sign, digits, nothing else).
func parseLen(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil || (b[0] == '+') || (len(b) > 1 && b[0] == '0') {
		return 0, false
	}
	return n, true
}

// readInline reads one inline command: words split by spaces, with
// Redis' quoting (sdssplitargs).
func (r *Reader) readInline() ([][]byte, error) {
	line, err := r.readLine(r.lim.MaxInline, true, ReasonInline, "too big inline request")
	if err != nil {
		return nil, err
	}
	args, ok := splitArgs(line)
	if !ok {
		return nil, protoErr(ReasonQuotes, "unbalanced quotes in request")
	}
	if len(args) > r.lim.MaxArgs {
		return nil, protoErr(ReasonArgs, "invalid multibulk length")
	}
	return args, nil
}

// splitArgs splits an inline command line as Redis' sdssplitargs does:
// words separated by blanks, "double quotes" with \n \r \t \b \a \\ \"
// and \xHH escapes, 'single quotes' with \' alone; a closing quote must
// be followed by a blank or the end.
func splitArgs(line []byte) ([][]byte, bool) {
	var args [][]byte
	i := 0
	for {
		for i < len(line) && isBlank(line[i]) {
			i++
		}
		if i >= len(line) {
			return args, true
		}
		var cur []byte
		var ok bool
		cur, i, ok = splitWord(line, i)
		if !ok {
			return nil, false
		}
		args = append(args, cur)
	}
}

func isBlank(c byte) bool {
	return c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == 0
}

// splitWord reads one word of line from i and returns it and the index
// after it.
func splitWord(line []byte, i int) ([]byte, int, bool) {
	cur := []byte{}
	inDQ, inSQ := false, false
	for ; i < len(line); i++ {
		c := line[i]
		switch {
		case inDQ:
			switch {
			case c == '\\' && i+3 < len(line) && line[i+1] == 'x' && isHex(line[i+2]) && isHex(line[i+3]):
				v, _ := strconv.ParseUint(string(line[i+2:i+4]), 16, 8)
				cur = append(cur, byte(v))
				i += 3
			case c == '\\' && i+1 < len(line):
				i++
				cur = append(cur, unescape(line[i]))
			case c == '"':
				if i+1 < len(line) && !isBlank(line[i+1]) {
					return nil, 0, false
				}
				return cur, i + 1, true
			default:
				cur = append(cur, c)
			}
		case inSQ:
			switch {
			case c == '\\' && i+1 < len(line) && line[i+1] == '\'':
				i++
				cur = append(cur, '\'')
			case c == '\'':
				if i+1 < len(line) && !isBlank(line[i+1]) {
					return nil, 0, false
				}
				return cur, i + 1, true
			default:
				cur = append(cur, c)
			}
		case isBlank(c):
			return cur, i, true
		case c == '"':
			inDQ = true
		case c == '\'':
			inSQ = true
		default:
			cur = append(cur, c)
		}
	}
	if inDQ || inSQ {
		return nil, 0, false
	}
	return cur, i, true
}

func isHex(c byte) bool {
	return bytes.IndexByte([]byte("0123456789abcdefABCDEF"), c) >= 0
}

func unescape(c byte) byte {
	switch c {
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	case 'b':
		return '\b'
	case 'a':
		return '\a'
	}
	return c
}
