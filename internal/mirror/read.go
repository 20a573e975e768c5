package mirror

import (
	"context"

	"github.com/kvd-project/kvd/internal/revision"
)

// Get answers an RPC read from the same state one-sided readers see: the
// region, under the table lock, so at a batch boundary (Apply). Reading
// the store instead would run up to one batch ahead of the region, and a
// one-sided GET that started after such a read finished could return the
// older value. The store is consulted only for a key the region lacks
// while the region is flagged incomplete; every read of such a key comes
// here (a one-sided miss is not trusted then), so all of them see the
// store, which never goes backwards, until the key is back in the region
// with the same or a newer value (repairLocked). A ReadIndex barrier
// returns only after the read index was applied, and Apply runs before
// that, so the region holds everything a read after one must see. While
// the store is ahead by a batch the region has not applied (BatchAhead),
// such a read waits for that batch's Apply: from the store it could see
// the batch's write of this key while one-sided readers still see its
// earlier writes of other keys as they were (say a transaction at index 8
// that wrote this key because it read j's write at 7: this read would show
// 8's write, and a later read of j the value before 7).
//
// meta is the key's revision metadata.
func (m *Mirror) Get(ctx context.Context, key []byte) (value []byte, meta revision.Meta, ok bool, err error) {
	for {
		m.tmu.Lock()
		if m.retired {
			m.tmu.Unlock()
			return nil, revision.Meta{}, false, ErrRetired
		}
		value, meta, ok, err = m.tbl.Get(key)
		switch {
		case err != nil:
			// Damaged in memory: one-sided readers reject it too and come
			// here, so the store answers every read of this key, as for a
			// key the region lacks.
			m.log.Error("table record failed verification; answering from the durable state", "err", err)
		case ok || !m.tbl.Header().Incomplete:
			m.tmu.Unlock()
			return value, meta, ok, nil
		}
		ahead := m.ahead
		if ahead == nil {
			value, meta, ok, err := m.store.Get(key)
			m.tmu.Unlock()
			return value, meta, ok, err
		}
		m.tmu.Unlock()
		select {
		case <-ahead:
		case <-ctx.Done():
			return nil, revision.Meta{}, false, ctx.Err()
		}
	}
}
