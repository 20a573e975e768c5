package resp

import (
	"bufio"
	"io"
	"math"
	"strconv"
)

// Writer encodes replies; Proto (2 or 3) selects the encoding of the
// types RESP2 lacks (null, map, set, double, boolean). Replies are
// buffered until Flush.
type Writer struct {
	bw    *bufio.Writer
	Proto int
	num   []byte
}

// NewWriter writes RESP2 replies to w until Proto is changed.
func NewWriter(w io.Writer) *Writer {
	return &Writer{bw: bufio.NewWriterSize(w, 16<<10), Proto: 2}
}

// Flush writes the buffered replies out.
func (w *Writer) Flush() error { return w.bw.Flush() }

// Buffered is how many bytes wait for Flush.
func (w *Writer) Buffered() int { return w.bw.Buffered() }

func (w *Writer) prefix(c byte, n int64) {
	w.bw.WriteByte(c)
	w.num = strconv.AppendInt(w.num[:0], n, 10)
	w.bw.Write(w.num)
	w.bw.WriteString("\r\n")
}

// Simple writes a simple string (+OK). s must hold no CR or LF.
func (w *Writer) Simple(s string) {
	w.bw.WriteByte('+')
	w.bw.WriteString(s)
	w.bw.WriteString("\r\n")
}

// Error writes an error reply; msg starts with its code ("ERR ...").
// CR and LF in it are replaced by spaces, as Redis does.
func (w *Writer) Error(msg string) {
	w.bw.WriteByte('-')
	for i := 0; i < len(msg); i++ {
		c := msg[i]
		if c == '\r' || c == '\n' {
			c = ' '
		}
		w.bw.WriteByte(c)
	}
	w.bw.WriteString("\r\n")
}

// Int writes an integer reply.
func (w *Writer) Int(n int64) { w.prefix(':', n) }

// Bulk writes a bulk string.
func (w *Writer) Bulk(b []byte) {
	w.prefix('$', int64(len(b)))
	w.bw.Write(b)
	w.bw.WriteString("\r\n")
}

// BulkString writes s as a bulk string.
func (w *Writer) BulkString(s string) {
	w.prefix('$', int64(len(s)))
	w.bw.WriteString(s)
	w.bw.WriteString("\r\n")
}

// Verbatim writes a RESP3 verbatim string of format "txt" (a bulk string
// in RESP2), as Redis answers INFO and CLIENT INFO.
func (w *Writer) Verbatim(s string) {
	if w.Proto < 3 {
		w.BulkString(s)
		return
	}
	w.prefix('=', int64(len(s)+4))
	w.bw.WriteString("txt:")
	w.bw.WriteString(s)
	w.bw.WriteString("\r\n")
}

// Null writes the null reply: RESP2's null bulk string, RESP3's null.
func (w *Writer) Null() {
	if w.Proto >= 3 {
		w.bw.WriteString("_\r\n")
		return
	}
	w.bw.WriteString("$-1\r\n")
}

// NullArray writes the null array (EXEC aborted by WATCH): RESP2's *-1,
// RESP3's null.
func (w *Writer) NullArray() {
	if w.Proto >= 3 {
		w.bw.WriteString("_\r\n")
		return
	}
	w.bw.WriteString("*-1\r\n")
}

// Array starts an array of n elements; the caller writes them.
func (w *Writer) Array(n int) { w.prefix('*', int64(n)) }

// Map starts a map of n pairs (RESP2: an array of 2n elements); the
// caller writes key, value, key, value...
func (w *Writer) Map(n int) {
	if w.Proto >= 3 {
		w.prefix('%', int64(n))
		return
	}
	w.prefix('*', int64(2*n))
}

// Set starts a set of n elements (RESP2: an array).
func (w *Writer) Set(n int) {
	if w.Proto >= 3 {
		w.prefix('~', int64(n))
		return
	}
	w.prefix('*', int64(n))
}

// Double writes a floating point number: a RESP3 double, or the bulk
// string Redis writes in RESP2.
func (w *Writer) Double(f float64) {
	s := FormatFloat(f)
	if w.Proto >= 3 {
		w.bw.WriteByte(',')
		w.bw.WriteString(s)
		w.bw.WriteString("\r\n")
		return
	}
	w.BulkString(s)
}

// FormatFloat formats f as Redis prints a float it stores (INCRBYFLOAT):
// the shortest decimal that reads back as f, no exponent.
func FormatFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}
