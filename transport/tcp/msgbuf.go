package tcp

import (
	"math/bits"
	"sync"
)

// Message buffers. A MSG's payload is read into a buffer taken from a pool
// shared by every connection and given back by Recv once it has copied the
// message out, so no connection holds a buffer while it has nothing queued.
// Buffers kept per credit slot did not do that: a peer that once sent a
// window of large messages (64 of 64 KiB) left its connection holding them
// all, about 4 MiB, for as long as it stayed open, and an idle connection is
// meant to cost tens of KiB (doc.go). The pool keeps steady traffic free of
// allocations; what it holds while nothing uses it the GC reclaims.
//
// Messages of at most keepMsgBuf bytes take a buffer of the smallest
// power-of-two class from minMsgBuf that fits; larger ones grow a buffer of
// their own as their bytes arrive (readPayload) and drop it after Recv.
const (
	minMsgBuf  = 256
	msgClasses = 9 // 256 B .. 64 KiB
)

// keepMsgBuf is the largest message buffer the pool takes back.
const keepMsgBuf = minMsgBuf << (msgClasses - 1)

var msgBufs [msgClasses]sync.Pool // of *[]byte, cap exactly the class's size

// msgClass is the smallest class holding n bytes (n <= keepMsgBuf).
func msgClass(n int) int {
	if n <= minMsgBuf {
		return 0
	}
	return bits.Len(uint(n-1)) - bits.Len(uint(minMsgBuf-1))
}

// getMsgBuf returns a buffer of length n (n <= keepMsgBuf) from the pool.
func getMsgBuf(n int) *[]byte {
	c := msgClass(n)
	if p, _ := msgBufs[c].Get().(*[]byte); p != nil {
		*p = (*p)[:n]
		return p
	}
	b := make([]byte, n, minMsgBuf<<c)
	return &b
}

// putMsgBuf gives a buffer getMsgBuf returned back to the pool.
func putMsgBuf(p *[]byte) {
	msgBufs[msgClass(cap(*p))].Put(p)
}
