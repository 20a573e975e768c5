package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvd-project/kvd/bench/workload"
)

// loaded identifies what Preload last wrote.
type loaded struct{ keys, keySize, valueSize int }

// Preload writes every key of w's key space with a value of w's size, with
// PreloadWorkers PUTs in flight, so GETs find their keys, then pauses for
// Settle. It skips all that if the previous Preload wrote the same key
// space and value size.
func (r *Runner) Preload(ctx context.Context, w workload.Config) error {
	w = w.WithDefaults()
	if err := w.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	want := loaded{w.Keys, w.KeySize, w.ValueSize}
	if r.preloaded == want {
		return nil
	}
	r.preloaded = loaded{}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var next atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	var firstErr error
	// Large values are written fewer at a time: 32 PUTs of 1 MiB in flight
	// make one 32 MiB Raft batch, which an emulated cluster (the RDMA VM)
	// takes longer to replicate than a request may last.
	n := min(r.cfg.PreloadWorkers, w.Keys, max(1, int(preloadInflight/recordSize(w.KeySize, w.ValueSize))))
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			gen := workload.New(w, r.cfg.Seed, uint64(i))
			store := r.cfg.Stores[i%len(r.cfg.Stores)]
			for ctx.Err() == nil {
				k := int(next.Add(1) - 1)
				if k >= w.Keys {
					return
				}
				if err := putRetrying(ctx, store, gen.Key(k), gen.Value()); err != nil {
					once.Do(func() { firstErr = fmt.Errorf("%w: key %d of %d: %w", ErrPreload, k, w.Keys, err); cancel() })
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	r.preloaded = want
	sleepUntil(ctx, time.Now().Add(r.cfg.Settle))
	return ctx.Err()
}

// preloadInflight bounds the bytes of the PUTs a preload has in flight.
const preloadInflight = 8 << 20

// preloadAttempts is how many times Preload tries one key's PUT. Writing
// the same value again is harmless, and a PUT whose outcome is unknown (a
// leader change, a node too slow to answer in the attempt timeout: the
// emulated RDMA VM under load) is not a reason to give up a whole point.
const preloadAttempts = 5

func putRetrying(ctx context.Context, s Store, key, value []byte) error {
	var err error
	for i := range preloadAttempts {
		if err = s.Put(ctx, key, value); err == nil || ctx.Err() != nil {
			return err
		}
		sleepUntil(ctx, time.Now().Add(time.Duration(i+1)*100*time.Millisecond))
	}
	return fmt.Errorf("%d attempts: %w", preloadAttempts, err)
}
