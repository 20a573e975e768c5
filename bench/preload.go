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
	n := min(r.cfg.PreloadWorkers, w.Keys)
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
				if err := store.Put(ctx, gen.Key(k), gen.Value()); err != nil {
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
