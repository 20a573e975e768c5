package bench

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvd-project/kvd/client"
)

// fakeStore is an in-memory Store. A GET costs two "round trips", or one
// RPC when rpcGets is set, in the client's counters. Once every key exists
// it allocates nothing per operation.
type fakeStore struct {
	rpcGets bool
	failPut uint64        // every failPut-th PUT fails (0: none)
	stallAt uint64        // the stallAt-th operation sleeps for stall
	stall   time.Duration // (0: none)

	*shared
	ops    atomic.Uint64
	gets   atomic.Uint64
	rounds atomic.Uint64
	reads  atomic.Uint64
	bytes  atomic.Uint64
	rpc    atomic.Uint64
	puts   atomic.Uint64
}

// shared is the fake cluster's data, which several fake clients share.
type shared struct {
	mu   sync.RWMutex
	data map[string][]byte
	vers map[string]uint64 // CAS versions (0: never CASed)
	next uint64
}

var errFake = errors.New("fake: injected failure")

func newFake() *fakeStore {
	return &fakeStore{shared: &shared{data: map[string][]byte{}, vers: map[string]uint64{}}}
}

// another is a second client of the same fake cluster.
func (f *fakeStore) another() *fakeStore { return &fakeStore{shared: f.shared} }

func (f *fakeStore) maybeStall() {
	if n := f.ops.Add(1); f.stall > 0 && n == f.stallAt {
		time.Sleep(f.stall)
	}
}

func (f *fakeStore) Get(ctx context.Context, key []byte, opts ...client.ReadOption) ([]byte, error) {
	f.maybeStall()
	f.gets.Add(1)
	if f.rpcGets {
		f.rpc.Add(1)
	} else {
		f.rounds.Add(2)
		f.reads.Add(6)
		f.bytes.Add(700)
	}
	f.mu.RLock()
	v, ok := f.data[string(key)]
	f.mu.RUnlock()
	if !ok {
		return nil, client.ErrNotFound
	}
	return v, nil
}

func (f *fakeStore) Put(ctx context.Context, key, value []byte) error {
	f.maybeStall()
	if n := f.puts.Add(1); f.failPut > 0 && n%f.failPut == 0 {
		return errFake
	}
	f.mu.Lock()
	if old, ok := f.data[string(key)]; ok && len(old) == len(value) {
		copy(old, value)
	} else {
		f.data[string(key)] = append([]byte(nil), value...)
	}
	f.mu.Unlock()
	return nil
}

// Scan reads up to limit keys from start on, in key order, as kvd's Range
// does.
func (f *fakeStore) Scan(ctx context.Context, start []byte, limit int, opts ...client.ReadOption) (int, error) {
	f.maybeStall()
	f.gets.Add(1)
	f.mu.RLock()
	defer f.mu.RUnlock()
	keys := make([]string, 0, len(f.data))
	for k := range f.data {
		if k >= string(start) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return min(limit, len(keys)), nil
}

func (f *fakeStore) GetModRevision(ctx context.Context, key []byte, opts ...client.ReadOption) ([]byte, uint64, error) {
	v, err := f.Get(ctx, key, opts...)
	f.mu.RLock()
	ver := f.vers[string(key)]
	f.mu.RUnlock()
	return v, ver, err
}

// CompareAndSwap is exact, like kvd's: the version is compared and bumped
// under the lock.
func (f *fakeStore) CompareAndSwap(ctx context.Context, key, value []byte, version uint64) error {
	f.maybeStall()
	f.puts.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	if cur := f.vers[string(key)]; cur != version {
		return &client.ConflictError{Key: append([]byte(nil), key...), ModRevision: cur, Expected: version}
	}
	f.next++
	f.vers[string(key)] = f.next
	f.data[string(key)] = append([]byte(nil), value...)
	return nil
}

func (f *fakeStore) Stats() client.Stats {
	return client.Stats{Gets: f.gets.Load(), OneSidedRounds: f.rounds.Load(),
		OneSidedReads: f.reads.Load(), OneSidedBytes: f.bytes.Load(), RPCGets: f.rpc.Load(),
		Retries: map[string]uint64{"torn": f.gets.Load() / 100}}
}

func (f *fakeStore) len() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return len(f.data)
}
