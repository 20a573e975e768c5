package store

import (
	"errors"

	"github.com/cockroachdb/pebble/v2"
)

var keyRevision = []byte("mrevision")

// Revision is the store revision as this Update sees it (its own
// SetRevision included): the revision of the last applied request that
// changed the state.
func (u *Update) Revision() uint64 {
	raw, c, err := u.b.Get(keyRevision)
	if err != nil {
		return 0
	}
	defer c.Close()
	v, _ := decodeU64(raw)
	return v
}

// SetRevision records rev as the store revision, in the Update's batch.
func (u *Update) SetRevision(rev uint64) error {
	return u.b.Set(keyRevision, encodeU64(rev), nil)
}

// Revision is the committed store revision.
func (s *Store) Revision() uint64 {
	raw, c, err := s.db.Get(keyRevision)
	if errors.Is(err, pebble.ErrNotFound) || err != nil {
		return 0
	}
	defer c.Close()
	v, _ := decodeU64(raw)
	return v
}
