package store

import (
	"errors"

	"github.com/cockroachdb/pebble/v2"
)

// The store revision is applied state like the keys: it lives under the KV
// generation, beside the leases ('e' + be64(gen) + 'r': le64 revision), so
// that a snapshot carries it and its install swaps it with the keys.
const leaseRevision = 'r'

func revisionKey(gen uint64) []byte { return append(leaseGenPrefix(gen), leaseRevision) }

// Revision is the store revision as this Update sees it (its own
// SetRevision included): the revision of the last applied request that
// changed the state.
func (u *Update) Revision() uint64 {
	raw, c, err := u.b.Get(revisionKey(u.gen))
	if err != nil {
		return 0
	}
	defer c.Close()
	v, _ := decodeU64(raw)
	return v
}

// SetRevision records rev as the store revision, in the Update's batch.
func (u *Update) SetRevision(rev uint64) error {
	return u.b.Set(revisionKey(u.gen), encodeU64(rev), nil)
}

// Revision is the committed store revision.
func (s *Store) Revision() uint64 {
	s.genMu.RLock()
	defer s.genMu.RUnlock()
	raw, c, err := s.db.Get(revisionKey(s.gen))
	if errors.Is(err, pebble.ErrNotFound) || err != nil {
		return 0
	}
	defer c.Close()
	v, _ := decodeU64(raw)
	return v
}
