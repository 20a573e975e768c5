package redisapi

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/resp"
)

// reply is one command's answer, written in the connection's protocol
// version. Replies are values so that EXEC can collect them.
type reply interface{ writeTo(w *resp.Writer) }

type (
	simple    string
	errReply  string
	intReply  int64
	bulk      []byte
	nullReply struct{}
	nullArray struct{}
	array     []reply
	floatRepl float64
	verbatim  string
	// mapReply is a RESP3 map (a flat array in RESP2): keys and values
	// alternate.
	mapReply []reply
)

func (r simple) writeTo(w *resp.Writer)    { w.Simple(string(r)) }
func (r errReply) writeTo(w *resp.Writer)  { w.Error(string(r)) }
func (r intReply) writeTo(w *resp.Writer)  { w.Int(int64(r)) }
func (r bulk) writeTo(w *resp.Writer)      { w.Bulk(r) }
func (nullReply) writeTo(w *resp.Writer)   { w.Null() }
func (nullArray) writeTo(w *resp.Writer)   { w.NullArray() }
func (r floatRepl) writeTo(w *resp.Writer) { w.Double(float64(r)) }
func (r verbatim) writeTo(w *resp.Writer)  { w.Verbatim(string(r)) }

func (r array) writeTo(w *resp.Writer) {
	w.Array(len(r))
	for _, e := range r {
		e.writeTo(w)
	}
}

func (r mapReply) writeTo(w *resp.Writer) {
	w.Map(len(r) / 2)
	for _, e := range r {
		e.writeTo(w)
	}
}

const ok = simple("OK")

func bulkString(s string) reply { return bulk(s) }

func itoa(n int) string { return strconv.Itoa(n) }

// Redis' error replies.
const (
	errSyntax    = errReply("ERR syntax error")
	errNotInt    = errReply("ERR value is not an integer or out of range")
	errNotFloat  = errReply("ERR value is not a valid float")
	errOverflow  = errReply("ERR increment or decrement would overflow")
	errNaN       = errReply("ERR increment would produce NaN or Infinity")
	errTooBig    = errReply("ERR string exceeds maximum allowed size (proto-max-bulk-len)")
	errOffset    = errReply("ERR offset is out of range")
	errCursor    = errReply("ERR invalid cursor")
	errExecAbort = errReply("EXECABORT Transaction discarded because of previous errors.")
)

func wrongArgs(name string) reply {
	return errReply("ERR wrong number of arguments for '" + name + "' command")
}

// unknownCommand is Redis 7's reply to a command it does not know.
func unknownCommand(args [][]byte) reply {
	s := "ERR unknown command '" + clip(args[0]) + "', with args beginning with: "
	for _, a := range args[1:] {
		s += "'" + clip(a) + "' "
	}
	return errReply(s)
}

func unknownSubcommand(cmd string, sub []byte) reply {
	return errReply("ERR unknown subcommand '" + clip(sub) + "'. Try " + cmd + " HELP.")
}

// clip shortens an argument quoted in an error as Redis does (%.128s).
func clip(b []byte) string {
	if len(b) > 128 {
		b = b[:128]
	}
	return string(b)
}

// kvdError maps an error of kvd's client onto a Redis error reply.
func kvdError(err error) reply {
	switch {
	case errors.Is(err, client.ErrEmptyKey):
		return errReply("ERR kvd: empty keys are not supported")
	case errors.Is(err, client.ErrKeyTooLarge):
		return errReply(fmt.Sprintf("ERR kvd: keys are at most %d bytes", client.MaxKey))
	case errors.Is(err, client.ErrValueTooLarge):
		return errTooBig
	case errors.Is(err, client.ErrNoSpace):
		return errReply("OOM kvd: the table region is full; nothing was written")
	case errors.Is(err, client.ErrPermissionDenied):
		return errReply("NOPERM kvd: " + err.Error())
	case errors.Is(err, client.ErrUnavailable) && errors.Is(err, client.ErrNotApplied):
		return errReply("TRYAGAIN kvd: unavailable, nothing was applied: " + err.Error())
	case errors.Is(err, client.ErrUnavailable):
		return errReply("ERR kvd: unavailable, a write may or may not have been applied: " + err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return errReply("ERR kvd: the command timed out; a write may or may not have been applied")
	}
	return errReply("ERR kvd: " + err.Error())
}

func contextWithTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}
