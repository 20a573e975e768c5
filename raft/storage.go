package raft

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/kvd-project/kvd/internal/store"
)

// Storage failures.
//
// A node whose durable state fails stops for good. Two things notice:
//
//   - the store, at the moment the disk refuses a write (ENOSPC, EROFS,
//     EIO, a failed fsync) or Pebble reports an unrecoverable error, in
//     whatever goroutine that happens (store.Options.OnFault). The store
//     then writes nothing more, and every later commit fails at once (see
//     internal/store/fault.go);
//   - the raft loop, when handling a Ready fails (which such a fault makes
//     happen at the next Ready, within a tick).
//
// Either records the failure (the first cause wins) and closes Failed();
// the loop then fails every waiting proposal and read with it, and stops,
// so every later request fails at once too. All these errors are
// *StorageError values (ErrStorage; they match ErrStopped as well). After
// a failed fsync nothing more is acknowledged: the kernel may have dropped
// the data it could not write, and a retried fsync could claim otherwise.
// The node cannot recover in place; its process should exit, and a restart
// once the disk is fixed recovers everything that was acknowledged.

// failure is a node's failure record: a storage failure (*StorageError)
// or its removal from the cluster (*RemovedError, removal.go), whichever
// came first.
type failure struct {
	once sync.Once
	done chan struct{}
	err  atomic.Pointer[error]
}

func newFailure() *failure { return &failure{done: make(chan struct{})} }

// set records err (a fault's cause, or the error that stopped the loop) as
// the node's failure, unless one is recorded, and returns the recorded one.
func (f *failure) set(err error) error {
	return f.record(asStorageError(err))
}

// record records err as it is, unless a failure is recorded, and returns
// the recorded one.
func (f *failure) record(err error) error {
	f.once.Do(func() {
		f.err.Store(&err)
		close(f.done)
	})
	return f.get()
}

func (f *failure) get() error {
	if p := f.err.Load(); p != nil {
		return *p
	}
	return nil
}

// asStorageError names err's root cause: a store fault's cause rather
// than the layers of context wrapped around it.
func asStorageError(err error) *StorageError {
	var se *StorageError
	if errors.As(err, &se) {
		return se
	}
	var fe *store.FaultError
	if errors.As(err, &fe) {
		return &StorageError{Err: fe.Cause}
	}
	return &StorageError{Err: err}
}

// Failure returns why the node stopped for good: a storage failure (a
// *StorageError) or its removal from the cluster (a *RemovedError), or
// nil while it has not. Once non-nil it stays so, and the node serves no
// more requests: its process should exit.
func (n *Node) Failure() error { return n.failure.get() }

// Failed is closed when the node fails (Failure becomes non-nil).
func (n *Node) Failed() <-chan struct{} { return n.failure.done }

// failStorage is the raft loop's last act when handling a Ready failed: it
// records the failure and fails every proposal and read waiting on the
// loop with it, then the loop exits (and later requests get stoppedErr).
func (l *loop) failStorage(err error) {
	se := l.n.failure.set(err)
	l.n.log.Error("raft loop stopped: storage failure; this node acknowledges nothing more and must be restarted",
		"err", err)
	for _, p := range l.batch {
		l.n.metrics.failed.Inc()
		p.finish(result{err: se})
	}
	clear(l.batch)
	l.batch, l.batchBytes = l.batch[:0], 0
	l.failWaiters(se, 0)
	l.reads.failAll(se)
}
