package mirror

import (
	"errors"
	"fmt"

	"github.com/kvd-project/kvd/internal/table"
	"github.com/kvd-project/kvd/raft"
)

// Admission. Writes the region has no room for are refused before they
// enter the log, so that nothing already stored is harmed and the region
// stays whole. The leader reserves, under the table lock, the room each
// admitted write's apply will take (its record's block and, for a new
// key, a slot), so writes admitted together, pipelined ahead of their
// applies, cannot overfill the region; the reservation ends when the
// proposal does, applied or not (table.Reserve).

// ErrRegionPartial refuses writes while a failed rebuild leaves the region
// partial; the repair loop retries the rebuild. Never proposed: the client
// retries.
var ErrRegionPartial = fmt.Errorf("%w: this leader's region is partial until its rebuild succeeds", raft.ErrProposalDropped)

// Reserve reserves the room a write of key with a value of valueLen bytes
// will take when applied, until Unreserve. It fails with table.ErrNoSpace
// when the region has none, or ErrRegionPartial.
func (m *Mirror) Reserve(key []byte, valueLen int) error {
	m.tmu.Lock()
	defer m.tmu.Unlock()
	return m.reserveLocked(key, valueLen)
}

// Unreserve ends a reservation Reserve made.
func (m *Mirror) Unreserve(key []byte, valueLen int) {
	m.tmu.Lock()
	defer m.tmu.Unlock()
	m.tbl.Unreserve(key, valueLen)
}

// Put is one write to reserve room for (ReserveAll).
type Put struct {
	Key      []byte
	ValueLen int
}

// ReserveAll reserves room for every write of puts, as Reserve does for
// one: either all are reserved, and release ends them, or none is.
func (m *Mirror) ReserveAll(puts []Put) (release func(), err error) {
	held := 0
	m.tmu.Lock()
	for _, p := range puts {
		if err = m.reserveLocked(p.Key, p.ValueLen); err != nil {
			break
		}
		held++
	}
	m.tmu.Unlock()
	release = func() {
		m.tmu.Lock()
		for _, p := range puts[:held] {
			m.tbl.Unreserve(p.Key, p.ValueLen)
		}
		m.tmu.Unlock()
	}
	if err != nil {
		release()
		return func() {}, err
	}
	return release, nil
}

// reserveLocked is admission for one write: the table reserves the room
// its apply will take (table.Reserve); when the region has none, the
// refusal is counted and fragmented free space compacted.
//
// The region must also keep room for what it lacks. A key applied but not
// placed (m.missing: a write a follower's region could not fit, kept when
// the follower became leader) is in no slot and no block, so Reserve does
// not see it; admitting into its room would commit more than a fresh
// region of this size holds, and the node could not restart. So while
// keys are missing their records' bytes and slots are counted too. And
// while a failed rebuild leaves the region partial, with keys not yet
// walked counted nowhere, nothing is admitted (the client retries).
func (m *Mirror) reserveLocked(key []byte, valueLen int) error {
	if m.rebuildFailed {
		return ErrRegionPartial
	}
	err := m.tbl.Reserve(key, valueLen)
	if err == nil && len(m.missing) > 0 && !m.roomForMissingLocked(key) {
		m.tbl.Unreserve(key, valueLen)
		err = fmt.Errorf("%w: the region keeps room for %d applied keys it lacks (%d bytes)",
			table.ErrNoSpace, len(m.missing), m.missingBytes)
	}
	if errors.Is(err, table.ErrNoSpace) {
		m.counts.refusals.Add(1)
		m.compactLocked() // if free space is cut up, it is whole again a grace period from now
	}
	return err
}

// roomForMissingLocked reports whether, with key's reservation made, the
// region still has room for the records of the keys it lacks, but key's
// own (this write replaces it), counted as record-area blocks and slots.
func (m *Mirror) roomForMissingLocked(key []byte) bool {
	bytes, keys := m.missingBytes, len(m.missing)
	if n, ok := m.missing[string(key)]; ok {
		bytes, keys = bytes-n, keys-1
	}
	st := m.tbl.Stats()
	return st.BytesUsed+st.BytesReserved+st.BytesLimbo+bytes <= st.BytesArea &&
		st.Keys+st.SlotsHeld+st.SlotsPending+keys <= st.KeyCapacity
}
