package floor

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// MaxRequest bounds one client request (a key and a value) so that a
// stray client cannot make a node allocate without limit.
const MaxRequest = 1 << 20

// maxBatch bounds one batch frame a follower accepts.
const maxBatch = 64 << 20

// logSize is the size of each node's preallocated log file; writes wrap
// around it.
const logSize = 64 << 20

// errBadFrame reports a frame longer than its bound.
var errBadFrame = errors.New("floor: frame too long")

// Appender is a node's durable log. Append makes one batch frame body
// durable (unless the log was opened without sync) before it returns; it
// does not keep b. Only one goroutine calls Append.
type Appender interface {
	Append(b []byte) error
	Close() error
}

// Log is a node's durable log: a preallocated file written in a cycle
// and fdatasynced after every batch.
type Log struct {
	f    *os.File
	off  int64
	sync bool
}

// OpenLog creates path, writes logSize zero bytes to it and syncs them,
// so that later overwrites change no metadata. With sync false, Append
// skips the fdatasync (to measure what the disk costs).
func OpenLog(path string, sync bool) (*Log, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	zero := make([]byte, 1<<20)
	for off := 0; off < logSize; off += len(zero) {
		if _, err := f.Write(zero); err != nil {
			f.Close()
			return nil, err
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, err
	}
	return &Log{f: f, sync: sync}, nil
}

// Append writes b at the log's cursor (wrapping at the end) and, if the
// log syncs, fdatasyncs it before returning.
func (l *Log) Append(b []byte) error {
	if len(b) > logSize {
		return fmt.Errorf("%w: batch of %d bytes", errBadFrame, len(b))
	}
	if l.off+int64(len(b)) > logSize {
		l.off = 0
	}
	if _, err := l.f.WriteAt(b, l.off); err != nil {
		return err
	}
	l.off += int64(len(b))
	if !l.sync {
		return nil
	}
	// fdatasync, as Pebble syncs its WAL: f.Sync is fsync, which also
	// writes the inode (every overwrite changes its mtime).
	return unix.Fdatasync(int(l.f.Fd()))
}

// Close closes the file.
func (l *Log) Close() error { return l.f.Close() }

// Follow serves one leader connection: each batch frame (length, sequence
// number, bytes) is appended to log and acknowledged with its sequence
// number. It returns when the connection ends.
func Follow(c net.Conn, log Appender) error {
	r := bufio.NewReaderSize(c, 256<<10)
	var hdr [8]byte
	buf := make([]byte, 0, 64<<10)
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		n := binary.BigEndian.Uint32(hdr[0:4])
		if n > maxBatch {
			return fmt.Errorf("%w: batch of %d bytes", errBadFrame, n)
		}
		buf = grow(buf, int(n))
		if _, err := io.ReadFull(r, buf); err != nil {
			return err
		}
		if err := log.Append(buf); err != nil {
			return err
		}
		if _, err := c.Write(hdr[4:8]); err != nil {
			return err
		}
	}
}

func grow(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}

// request is one client request waiting in a batch.
type request struct {
	c       net.Conn
	payload []byte
}

// Leader replicates client requests to its followers. Its methods are
// safe for concurrent use; Serve and each ServeClient run on their own
// goroutines.
type Leader struct {
	log       Appender
	followers []net.Conn
	in        chan request
	acks      chan uint32
	done      chan struct{}
	closeOnce sync.Once
}

// NewLeader returns a leader that logs to log and replicates to
// followers (connections it now owns).
func NewLeader(log Appender, followers []net.Conn) *Leader {
	l := &Leader{
		log:       log,
		followers: followers,
		in:        make(chan request, 4096),
		acks:      make(chan uint32, 64),
		done:      make(chan struct{}),
	}
	for _, f := range followers {
		go l.readAcks(f)
	}
	return l
}

// Close stops Serve and closes the follower connections.
func (l *Leader) Close() {
	l.closeOnce.Do(func() {
		close(l.done)
		for _, f := range l.followers {
			f.Close()
		}
	})
}

func (l *Leader) readAcks(c net.Conn) {
	r := bufio.NewReader(c)
	var b [4]byte
	for {
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return
		}
		select {
		case l.acks <- binary.BigEndian.Uint32(b[:]):
		case <-l.done:
			return
		}
	}
}

// ServeClient reads one client's requests (length-prefixed) and queues
// them for the next batch. The client has at most one request in flight:
// it sends the next only after the reply, which is written after the
// batch has copied the payload, so one buffer per connection suffices.
func (l *Leader) ServeClient(c net.Conn) error {
	defer c.Close()
	r := bufio.NewReaderSize(c, 4<<10)
	var hdr [4]byte
	buf := make([]byte, 0, 512)
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		n := binary.BigEndian.Uint32(hdr[:])
		if n > MaxRequest {
			return fmt.Errorf("%w: request of %d bytes", errBadFrame, n)
		}
		buf = grow(buf, int(n))
		if _, err := io.ReadFull(r, buf); err != nil {
			return err
		}
		select {
		case l.in <- request{c: c, payload: buf}:
		case <-l.done:
			return nil
		}
	}
}

// Serve runs the batch loop until Close: gather what arrived, send it to
// the followers, log it, wait for a majority, reply. A batch's sequence
// number is the reply's body, so a client can count batches.
func (l *Leader) Serve() error {
	var (
		batch []request
		frame = make([]byte, 8, 64<<10)
		reply [4]byte
		seq   uint32
	)
	// A majority of len(followers)+1 nodes, less the leader itself.
	quorum := (len(l.followers) + 1) / 2
	for {
		batch = batch[:0]
		select {
		case r := <-l.in:
			batch = append(batch, r)
		case <-l.done:
			return nil
		}
	drain:
		for {
			select {
			case r := <-l.in:
				batch = append(batch, r)
			default:
				break drain
			}
		}
		seq++
		frame = frame[:8]
		for _, r := range batch {
			frame = binary.BigEndian.AppendUint32(frame, uint32(len(r.payload)))
			frame = append(frame, r.payload...)
		}
		binary.BigEndian.PutUint32(frame[0:4], uint32(len(frame)-8))
		binary.BigEndian.PutUint32(frame[4:8], seq)
		for _, f := range l.followers {
			if _, err := f.Write(frame); err != nil {
				return err
			}
		}
		if err := l.log.Append(frame[8:]); err != nil {
			return err
		}
		for got := 0; got < quorum; {
			select {
			case a := <-l.acks:
				if a == seq {
					got++
				}
			case <-l.done:
				return nil
			}
		}
		binary.BigEndian.PutUint32(reply[:], seq)
		for _, r := range batch {
			r.c.Write(reply[:]) // a failed client is its own reader's concern
		}
	}
}
