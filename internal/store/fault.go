package store

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Storage faults.
//
// A write the disk refuses (ENOSPC, EDQUOT, EROFS, EIO, EACCES/EPERM on
// creating or renaming a file, any error from a write or an fsync) is a
// fault, and the store's first fault is final:
//
//   - The file system wrapper (faultFS) records it before the failing call
//     returns, and from then on lets nothing more reach the disk. The
//     goroutine that hit it, and every later one that tries to write, is
//     parked for good instead of being handed the error. Pebble cannot
//     handle these errors: it panics in WAL rotation (and unwinding a
//     deferred Unlock of a mutex it had released turns that into a second,
//     fatal error that hides the first), treats a failed commit as fatal,
//     and retries failed flushes in a tight loop. Parked, it does none of
//     that, and what is on disk is exactly what a crash at the moment of
//     the fault would have left, which Pebble recovers from on the next
//     Open (nothing synced before the fault is lost). After a failed fsync
//     the kernel may have dropped the dirty pages it could not write, so a
//     retried fsync could report success for data that is gone (PostgreSQL
//     and etcd learned this in 2018, "fsyncgate"): never retrying, and
//     never acknowledging anything afterwards, is the only safe answer.
//   - Every write the store makes (Update.Commit, CreateSnapshot, staging,
//     Open) runs through guard, which refuses once a fault is recorded and
//     returns the fault at once if one is recorded while the write is in
//     Pebble, leaving the parked goroutine behind. So no caller waits on a
//     parked write, and no commit is reported successful once the store
//     faulted (an acknowledgement could otherwise follow a failed fsync).
//   - Pebble's own reports of unrecoverable errors (Logger.Fatalf) and of
//     data corruption are faults too.
//
// A faulted store never becomes usable again: Close leaves the database as
// it is (closing it could wait for a parked goroutine forever), and the
// process should exit and be restarted once the disk is fixed.

// FaultError is the error of every store write refused or cut short by a
// storage fault. Cause is the fault as the file system (or Pebble) reported
// it, e.g. "write /data/000012.log: no space left on device".
type FaultError struct{ Cause error }

func (e *FaultError) Error() string { return "store: storage fault: " + e.Cause.Error() }

// Unwrap returns the cause.
func (e *FaultError) Unwrap() error { return e.Cause }

// Is makes errors.Is(err, ErrFault) hold.
func (e *FaultError) Is(target error) bool { return target == ErrFault }

// faultState is a store's fault record, shared by its file system wrapper,
// its Pebble logger and its writers.
type faultState struct {
	once    sync.Once
	done    chan struct{} // closed at the first fault
	cause   atomic.Pointer[error]
	parked  atomic.Int64 // goroutines parked for good
	onFault func(error)  // Options.OnFault
	log     *limitedLog
}

func newFaultState(onFault func(error), log *limitedLog) *faultState {
	return &faultState{done: make(chan struct{}), onFault: onFault, log: log}
}

// trip records cause as the store's fault unless one is recorded already.
func (f *faultState) trip(cause error) {
	f.once.Do(func() {
		f.cause.Store(&cause) // from here on nothing reaches the disk
		f.log.always("storage fault: the store stops writing; nothing more is acknowledged; "+
			"restart once the disk is fixed (what was acknowledged is on disk)", "err", cause)
		if f.onFault != nil {
			f.onFault(cause)
		}
		close(f.done) // after onFault: whoever sees done sees its effects
	})
}

// err is the FaultError of the recorded fault, or nil.
func (f *faultState) err() error {
	if p := f.cause.Load(); p != nil {
		return &FaultError{Cause: *p}
	}
	return nil
}

func (f *faultState) tripped() bool { return f.cause.Load() != nil }

// never is never closed: parked goroutines wait on it.
var never chan struct{}

// park blocks the calling goroutine for good. It is what a write that the
// disk refused (or any write after that) gets instead of an error.
func (f *faultState) park() {
	f.parked.Add(1)
	<-never
}

// guard runs fn, a Pebble write, unless the store has faulted. If a fault
// is recorded before fn returns, guard returns it at once and fn is
// abandoned (finished is false): its goroutine may be parked in Pebble for
// good, and whatever fn uses (a batch) must be left alone. A fault recorded
// at any time before guard returns is returned instead of fn's result, so
// a write that "succeeded" after the disk failed is never reported as done.
// A panic inside fn becomes a fault.
func (f *faultState) guard(fn func() error) (err error, finished bool) {
	if err := f.err(); err != nil {
		return err, true
	}
	done := make(chan error, 1)
	go guardedCall(f, fn, done)
	select {
	case err = <-done:
		finished = true
	case <-f.done:
	}
	if ferr := f.err(); ferr != nil {
		return ferr, finished
	}
	return err, finished
}

// guardedCall is the body of guard's goroutine. A panic in Pebble becomes
// a fault (Pebble's Fatalf does not panic: it parks, see pebbleLogger).
func guardedCall(f *faultState, fn func() error, done chan<- error) {
	defer func() {
		if r := recover(); r != nil {
			buf := make([]byte, 16<<10)
			buf = buf[:runtime.Stack(buf, false)]
			f.log.always("pebble panicked in a write", "panic", fmt.Sprint(r), "stack", string(buf))
			f.trip(fmt.Errorf("pebble: panic: %v", r))
			done <- f.err()
		}
	}()
	done <- fn()
}

// Fault classification.

// faultErrnos are the errors that make a failed create, rename, link,
// remove, lock or close a fault: the disk (or file system) refuses writes.
// Others (a file that does not exist, say) are Pebble's to handle.
var faultErrnos = []error{syscall.ENOSPC, syscall.EDQUOT, syscall.EROFS, syscall.EIO, syscall.EACCES, syscall.EPERM, syscall.EFBIG}

func isFaultErrno(err error) bool {
	for _, e := range faultErrnos {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// faultFS wraps the file system Pebble writes through (see the comment at
// the top of this file). Reads pass through untouched.
type faultFS struct {
	vfs.FS
	f *faultState
}

var _ vfs.FS = (*faultFS)(nil)

// Unwrap returns the wrapped file system.
func (fs *faultFS) Unwrap() vfs.FS { return fs.FS }

// before parks the caller if the store has faulted: nothing reaches the
// disk after a fault.
func (fs *faultFS) before() {
	if fs.f.tripped() {
		fs.f.park()
	}
}

// after records err as a fault and parks the caller if it is one;
// otherwise it returns err.
func (fs *faultFS) after(err error, fault func(error) bool) error {
	if err != nil && fault(err) {
		fs.f.trip(err)
		fs.f.park()
	}
	return err
}

func anyErr(error) bool { return true }

func (fs *faultFS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &faultFile{File: f, fs: fs}, nil
}

func (fs *faultFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	fs.before()
	f, err := fs.FS.Create(name, category)
	return fs.wrap(f, fs.after(err, isFaultErrno))
}

func (fs *faultFS) Link(oldname, newname string) error {
	fs.before()
	return fs.after(fs.FS.Link(oldname, newname), isFaultErrno)
}

func (fs *faultFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	return fs.wrap(fs.FS.Open(name, opts...))
}

func (fs *faultFS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	fs.before()
	f, err := fs.FS.OpenReadWrite(name, category, opts...)
	return fs.wrap(f, fs.after(err, isFaultErrno))
}

func (fs *faultFS) OpenDir(name string) (vfs.File, error) {
	return fs.wrap(fs.FS.OpenDir(name)) // its Sync is checked
}

func (fs *faultFS) Remove(name string) error {
	fs.before()
	return fs.after(fs.FS.Remove(name), isFaultErrno)
}

func (fs *faultFS) RemoveAll(name string) error {
	fs.before()
	return fs.after(fs.FS.RemoveAll(name), isFaultErrno)
}

func (fs *faultFS) Rename(oldname, newname string) error {
	fs.before()
	return fs.after(fs.FS.Rename(oldname, newname), isFaultErrno)
}

func (fs *faultFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	fs.before()
	f, err := fs.FS.ReuseForWrite(oldname, newname, category)
	return fs.wrap(f, fs.after(err, isFaultErrno))
}

func (fs *faultFS) MkdirAll(dir string, perm os.FileMode) error {
	fs.before()
	return fs.after(fs.FS.MkdirAll(dir, perm), isFaultErrno)
}

func (fs *faultFS) Lock(name string) (io.Closer, error) {
	fs.before()
	c, err := fs.FS.Lock(name)
	return c, fs.after(err, isFaultErrno)
}

// faultFile checks a file's writes and syncs. Any error from a write or a
// sync is a fault; a failed Close only with a fault errno (a delayed write
// error). Preallocate errors are ignored by Pebble, and so here.
type faultFile struct {
	vfs.File
	fs *faultFS
}

func (f *faultFile) Write(p []byte) (int, error) {
	f.fs.before()
	n, err := f.File.Write(p)
	return n, f.fs.after(err, anyErr)
}

func (f *faultFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.before()
	n, err := f.File.WriteAt(p, off)
	return n, f.fs.after(err, anyErr)
}

func (f *faultFile) Sync() error {
	f.fs.before()
	return f.fs.after(f.File.Sync(), anyErr)
}

func (f *faultFile) SyncData() error {
	f.fs.before()
	return f.fs.after(f.File.SyncData(), anyErr)
}

func (f *faultFile) SyncTo(length int64) (bool, error) {
	f.fs.before()
	full, err := f.File.SyncTo(length)
	return full, f.fs.after(err, anyErr)
}

func (f *faultFile) Close() error {
	return f.fs.after(f.File.Close(), isFaultErrno)
}
