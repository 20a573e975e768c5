package peer

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/kvd-project/kvd/internal/store"
)

// Peer connections. Each node dials one connection to every peer and uses
// it only for its own outgoing traffic; it learns nothing from the reverse
// direction. The first message on a peer connection is the hello:
//
//	"KVDPEER1" | le64 sender id | le64 cluster id | sender's address
//	           [ | 0x00 | sender's client address
//	           [ | 0x00 | le16 data format ] ]
//
// The accepting node answers nothing: it serves the connection only if the
// hello names its own cluster id (never 0; see identity.go) and a sender
// that is one of its members, and closes it otherwise (answering a removed
// member's hello with the 'R' frame first: removal.go). Every node checks
// the hellos of the sessions it serves, and a node takes raft messages only
// from sessions it serves, so both directions between two nodes are
// checked, each by its receiver. The address (at most maxHelloAddr bytes)
// tells a joining node where to answer a member it has no address for.
// The client address, sent only by a node whose clients and peers have
// addresses of their own (a peer listener), is what the receiver gives
// clients as that node's address when it leads. A node without it (one
// address, or an older version) takes the whole tail for its address, so
// a node sends it only when it differs.
//
// The data format (store.DataFormat) is what the sender's data means:
// members of one cluster must all run one, and a node refuses the session
// of a peer of another format (admitHello). A node sends it always, after
// a client address that is empty when it is the address; a hello without
// it comes from a build of before data formats: format 1. (Such a node
// takes the format's bytes for part of the client address, and knows
// nothing of formats: see upgrading.md.)
//
// after which every message is one frame, tagged by its first byte:
//
//	'M' raftpb.Message (protobuf), of any type but MsgSnap
//	'B' id                                 a snapshot transfer begins
//	'C' id | { uvarint len | key | uvarint len | le64 version + value }*
//	                                       snapshot data, in key order
//	'L' id | { uvarint len | record key | uvarint len | record value }*
//	                                       TTL lease records (store/lease.go),
//	                                       after the data, in key order
//	'H' id | { uvarint len | record key | uvarint len | record value }*
//	                                       revision space: store and
//	                                       compaction revisions and history
//	                                       (store/revision.go), after the
//	                                       leases, in key order
//	'S' id | raftpb.Message (protobuf)     the MsgSnap that ends the transfer
//	'R' le64 member id                     that member was removed (removal.go)
//	'F' le16 data format                   the first frame of a dialled session (format.go)
//
// (A node without TTL leases takes an 'L' frame for an unknown frame and
// drops the session: upgrade every node before granting leases; so does a
// node without revisions an 'H' frame.)
//
// where id, the transfer id, is le64 index | le64 term | le64 nonce: the
// snapshot's index and term and a random number the sender draws for the
// transfer. A transfer is 'B', any number of 'C', then 'S' carrying the
// MsgSnap for that index and term, all with the same id; the receiver
// stages the data of the transfer its latest 'B' began, ignores 'C' and
// 'S' frames of any other transfer, and installs the data only with its
// 'S'. A sender streams at most one transfer per peer at a time, but the
// ids keep a stray frame of an abandoned transfer (sends from different
// goroutines interleave) from ever mixing into another's data.

var helloMagic = []byte("KVDPEER1")

const helloHeader = 8 + 8 + 8

// maxHelloAddr bounds the address in a hello.
const maxHelloAddr = 255

// Frame tags: the first byte of every frame after the hello.
const (
	FrameMessage       byte = 'M'
	FrameSnapshotBegin byte = 'B'
	FrameSnapshotChunk byte = 'C'
	FrameSnapshotEnd   byte = 'S'
	FrameSnapshotLease byte = 'L'
	// FrameSnapshotRevision carries revision-space records.
	FrameSnapshotRevision byte = 'H'
)

// IsHello reports whether the first message of a newly accepted
// connection comes from a raft peer; if so, hand the connection to
// (*Set).Serve.
func IsHello(first []byte) bool {
	return len(first) >= helloHeader && bytes.Equal(first[:8], helloMagic)
}

// Hello is the first message of a peer connection: the sender's member
// id, its cluster id (0 before a joining node learned it), the address
// peers reach it at and, if it differs, the one its clients do.
type Hello struct {
	From, Cluster uint64
	Addr          string
	ClientAddr    string // "": Addr
	// Format is the sender's data format (store.DataFormat); 0 in the
	// hello of a build that did not send one (DataFormat says what that
	// means).
	Format uint16
}

// DataFormat is the data format the sender runs.
func (h Hello) DataFormat() uint64 {
	if h.Format == 0 {
		return store.DataFormatNoRevisions
	}
	return uint64(h.Format)
}

// AppendHello appends h's encoding.
func AppendHello(dst []byte, h Hello) []byte {
	dst = append(dst, helloMagic...)
	dst = binary.LittleEndian.AppendUint64(dst, h.From)
	dst = binary.LittleEndian.AppendUint64(dst, h.Cluster)
	dst = append(dst, h.Addr...)
	client := h.ClientAddr != "" && h.ClientAddr != h.Addr
	if client || h.Format != 0 {
		dst = append(dst, 0)
	}
	if client {
		dst = append(dst, h.ClientAddr...)
	}
	if h.Format != 0 {
		dst = append(dst, 0)
		dst = binary.LittleEndian.AppendUint16(dst, h.Format)
	}
	return dst
}

// parseHello decodes a hello; the cluster id is checked by the caller
// (admitHello), which knows this node's.
func parseHello(b []byte) (Hello, error) {
	if !IsHello(b) {
		return Hello{}, fmt.Errorf("raft: not a peer hello")
	}
	h := Hello{
		From:    binary.LittleEndian.Uint64(b[8:]),
		Cluster: binary.LittleEndian.Uint64(b[16:]),
		Addr:    string(b[helloHeader:]),
	}
	var format string
	tail := false // a client address field
	if addr, rest, ok := strings.Cut(h.Addr, "\x00"); ok {
		h.Addr, h.ClientAddr, tail = addr, rest, true
		if client, f, ok := strings.Cut(rest, "\x00"); ok {
			h.ClientAddr, format = client, f
			if len(format) != 2 {
				return h, fmt.Errorf("raft: hello with a %d-byte data format", len(format))
			}
			h.Format = binary.LittleEndian.Uint16([]byte(format))
		}
	}
	switch {
	case h.From == 0:
		return h, fmt.Errorf("raft: hello from node 0")
	case format != "" && h.Format == 0:
		return h, fmt.Errorf("raft: hello with data format 0")
	case tail && (h.ClientAddr != "" && h.ClientAddr == h.Addr || h.ClientAddr == "" && format == ""):
		// AppendHello sends no such field: one hello, one encoding.
		return h, fmt.Errorf("raft: hello with a client address field that says nothing")
	case len(h.Addr) > maxHelloAddr:
		return h, fmt.Errorf("raft: hello with a %d-byte address", len(h.Addr))
	case len(h.ClientAddr) > maxHelloAddr:
		return h, fmt.Errorf("raft: hello with a %d-byte client address", len(h.ClientAddr))
	}
	return h, nil
}

// TransferID names one snapshot transfer (see the frame layout above).
type TransferID struct {
	Index, Term, Nonce uint64
}

const transferIDLen = 24

// SnapshotHeaderLen is the length of a 'B', 'C' or 'S' frame's tag and id.
const SnapshotHeaderLen = 1 + transferIDLen

func (id TransferID) String() string {
	return fmt.Sprintf("%d/%d#%016x", id.Index, id.Term, id.Nonce)
}

// AppendSnapshotHeader appends a snapshot frame's tag and id.
func AppendSnapshotHeader(dst []byte, tag byte, id TransferID) []byte {
	dst = append(dst, tag)
	dst = binary.LittleEndian.AppendUint64(dst, id.Index)
	dst = binary.LittleEndian.AppendUint64(dst, id.Term)
	return binary.LittleEndian.AppendUint64(dst, id.Nonce)
}

// parseSnapshotFrame splits a 'B', 'C' or 'S' frame into its id and body.
func parseSnapshotFrame(b []byte) (TransferID, []byte, error) {
	if len(b) < SnapshotHeaderLen {
		return TransferID{}, nil, fmt.Errorf("raft: snapshot frame %q of %d bytes", b[0], len(b))
	}
	id := TransferID{
		Index: binary.LittleEndian.Uint64(b[1:]),
		Term:  binary.LittleEndian.Uint64(b[9:]),
		Nonce: binary.LittleEndian.Uint64(b[17:]),
	}
	return id, b[SnapshotHeaderLen:], nil
}

// AppendSnapshotBegin appends the frame that begins transfer id.
func AppendSnapshotBegin(dst []byte, id TransferID) []byte {
	return AppendSnapshotHeader(dst, FrameSnapshotBegin, id)
}

func parseSnapshotBegin(b []byte) (TransferID, error) {
	id, body, err := parseSnapshotFrame(b)
	if err == nil && len(body) != 0 {
		err = fmt.Errorf("raft: snapshot begin frame of %d bytes", len(b))
	}
	return id, err
}

// AppendSnapshotEnd appends the frame carrying transfer id's MsgSnap m.
func AppendSnapshotEnd(dst []byte, id TransferID, m *pb.Message) ([]byte, error) {
	dst = AppendSnapshotHeader(dst, FrameSnapshotEnd, id)
	return proto.MarshalOptions{}.MarshalAppend(dst, m)
}

// chunkRecordSize is the space one pair takes in a chunk frame.
func chunkRecordSize(key, raw []byte) int {
	return UvarintLen(uint64(len(key))) + len(key) + UvarintLen(uint64(len(raw))) + len(raw)
}

// AppendChunkRecord appends one pair to a 'C' or 'L' frame.
func AppendChunkRecord(dst, key, raw []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(key)))
	dst = append(dst, key...)
	dst = binary.AppendUvarint(dst, uint64(len(raw)))
	return append(dst, raw...)
}

// forEachChunkRecord calls fn for every pair in a chunk frame (after its
// tag byte); key and raw alias b.
func forEachChunkRecord(b []byte, fn func(key, raw []byte) error) error {
	for len(b) > 0 {
		k, rest, ok := lenPrefixed(b)
		if !ok {
			return fmt.Errorf("raft: malformed snapshot chunk")
		}
		v, rest, ok := lenPrefixed(rest)
		if !ok {
			return fmt.Errorf("raft: malformed snapshot chunk")
		}
		if err := fn(k, v); err != nil {
			return err
		}
		b = rest
	}
	return nil
}

func lenPrefixed(b []byte) (field, rest []byte, ok bool) {
	n, w := binary.Uvarint(b)
	if w <= 0 || n > uint64(len(b)-w) {
		return nil, nil, false
	}
	b = b[w:]
	return b[:n], b[n:], true
}

// UvarintLen is the length of v's uvarint encoding.
func UvarintLen(v uint64) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}

// AppendMessage appends the 'M' frame carrying m.
func AppendMessage(dst []byte, m *pb.Message) ([]byte, error) {
	dst = append(dst, FrameMessage)
	return proto.MarshalOptions{}.MarshalAppend(dst, m)
}
