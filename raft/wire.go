package raft

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// Peer connections. Each node dials one connection to every peer and uses
// it only for its own outgoing traffic; it learns nothing from the reverse
// direction. The first message on a peer connection is the hello:
//
//	"KVDPEER1" | le64 sender id | le64 cluster id | sender's address
//
// after which every message is one frame, tagged by its first byte:
//
//	'M' raftpb.Message (protobuf)
//	'B' le64 index | le64 term             a snapshot transfer begins
//	'C' { uvarint len | key | uvarint len | le64 version + value }*
//	                                       snapshot data, in key order
//
// A transfer is 'B', any number of 'C', then the 'M' carrying the MsgSnap
// for that index and term; the receiver installs the data only with it.

var helloMagic = []byte("KVDPEER1")

const helloHeader = 8 + 8 + 8

const (
	frameMessage       byte = 'M'
	frameSnapshotBegin byte = 'B'
	frameSnapshotChunk byte = 'C'
)

// IsPeerHello reports whether the first message of a newly accepted
// connection comes from a raft peer; if so, hand the connection to
// (*Node).ServePeer.
func IsPeerHello(first []byte) bool {
	return len(first) >= helloHeader && bytes.Equal(first[:8], helloMagic)
}

type hello struct {
	from, cluster uint64
	addr          string
}

func appendHello(dst []byte, h hello) []byte {
	dst = append(dst, helloMagic...)
	dst = binary.LittleEndian.AppendUint64(dst, h.from)
	dst = binary.LittleEndian.AppendUint64(dst, h.cluster)
	return append(dst, h.addr...)
}

func parseHello(b []byte) (hello, error) {
	if !IsPeerHello(b) {
		return hello{}, fmt.Errorf("raft: not a peer hello")
	}
	return hello{
		from:    binary.LittleEndian.Uint64(b[8:]),
		cluster: binary.LittleEndian.Uint64(b[16:]),
		addr:    string(b[helloHeader:]),
	}, nil
}

func appendSnapshotBegin(dst []byte, index, term uint64) []byte {
	dst = append(dst, frameSnapshotBegin)
	dst = binary.LittleEndian.AppendUint64(dst, index)
	return binary.LittleEndian.AppendUint64(dst, term)
}

func parseSnapshotBegin(b []byte) (index, term uint64, err error) {
	if len(b) != 17 {
		return 0, 0, fmt.Errorf("raft: snapshot begin frame of %d bytes", len(b))
	}
	return binary.LittleEndian.Uint64(b[1:]), binary.LittleEndian.Uint64(b[9:]), nil
}

// chunkRecordSize is the space one pair takes in a chunk frame.
func chunkRecordSize(key, raw []byte) int {
	return uvarintLen(uint64(len(key))) + len(key) + uvarintLen(uint64(len(raw))) + len(raw)
}

func appendChunkRecord(dst, key, raw []byte) []byte {
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
	n, b, ok := uvarint(b)
	if !ok || n > uint64(len(b)) {
		return nil, nil, false
	}
	return b[:n], b[n:], true
}

func uvarintLen(v uint64) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}
