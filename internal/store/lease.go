package store

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// TTL leases are applied state like the keys: they live under
// the KV generation, so a snapshot install swaps them with the keys in one
// batch, and the same Update that writes a key records its lease.
//
//	"e" + be64(gen) + 'l' + be64(id)         lease: le64 ttl (ns) | le64 keys attached
//	"e" + be64(gen) + 'a' + be64(id) + key   key attached to lease id (empty value)
//	"e" + be64(gen) + 'k' + key              key's lease: le64 id
//
// A lease's deadline is not stored: it is the leader's alone (raft's
// lessor), restarted at the full TTL by every new leader.

const prefixLease = 'e'

const (
	leaseRec  = 'l'
	leaseAtt  = 'a'
	leaseOfKy = 'k'
)

var (
	leaseStart = []byte{prefixLease}
	leaseEnd   = []byte{prefixLease + 1}
)

const leaseKeyHeader = 9 // prefix + be64(gen)

func leaseGenPrefix(gen uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{prefixLease}, gen)
}

func leaseGenEnd(gen uint64) []byte {
	if gen == ^uint64(0) {
		return leaseEnd
	}
	return leaseGenPrefix(gen + 1)
}

func leaseKey(dst []byte, gen uint64, kind byte, id uint64, key []byte) []byte {
	dst = append(dst, prefixLease)
	dst = binary.BigEndian.AppendUint64(dst, gen)
	dst = append(dst, kind)
	if kind != leaseOfKy {
		dst = binary.BigEndian.AppendUint64(dst, id)
	}
	return append(dst, key...)
}

// Lease is one granted lease as the applied state has it.
type Lease struct {
	ID   uint64
	TTL  uint64 // nanoseconds
	Keys uint64 // keys attached
}

func encodeLease(l Lease) []byte {
	b := binary.LittleEndian.AppendUint64(nil, l.TTL)
	return binary.LittleEndian.AppendUint64(b, l.Keys)
}

func decodeLease(id uint64, raw []byte) (Lease, error) {
	if len(raw) != 16 {
		return Lease{}, fmt.Errorf("%w: lease record of %d bytes", ErrCorrupt, len(raw))
	}
	return Lease{ID: id, TTL: binary.LittleEndian.Uint64(raw), Keys: binary.LittleEndian.Uint64(raw[8:])}, nil
}

func (u *Update) getRaw(key []byte) ([]byte, bool, error) {
	r, err := u.reader()
	if err != nil {
		return nil, false, err
	}
	raw, c, err := r.Get(key)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		return nil, false, nil
	case err != nil:
		return nil, false, err
	}
	defer c.Close()
	return append([]byte(nil), raw...), true, nil
}

// Lease returns lease id as this Update sees it.
func (u *Update) Lease(id uint64) (Lease, bool, error) {
	raw, ok, err := u.getRaw(leaseKey(nil, u.gen, leaseRec, id, nil))
	if err != nil || !ok {
		return Lease{}, false, err
	}
	l, err := decodeLease(id, raw)
	return l, err == nil, err
}

// SetLease writes lease l's record (a grant, or a new key count).
func (u *Update) SetLease(l Lease) error {
	return u.b.Set(leaseKey(nil, u.gen, leaseRec, l.ID, nil), encodeLease(l), nil)
}

// KeyLease returns the lease key is attached to (0: none), from the key
// index.
func (u *Update) KeyLease(key []byte) (uint64, error) {
	if st := u.ix.get(key); st != nil {
		return st.lease, nil
	}
	return 0, nil
}

// noteKeyLease keeps the key index in step with a write of key's lease.
func (u *Update) noteKeyLease(key []byte, id uint64) {
	u.ixAhead = true
	u.ix.setLease(key, id)
}

// Attach records key as attached to lease id (which must exist) and counts
// it; the key must not be attached to any lease.
func (u *Update) Attach(key []byte, id uint64) error {
	l, ok, err := u.Lease(id)
	if err != nil || !ok {
		return errors.Join(err, fmt.Errorf("store: attach to missing lease %d", id))
	}
	l.Keys++
	u.noteKeyLease(key, id)
	return errors.Join(
		u.SetLease(l),
		u.b.Set(leaseKey(nil, u.gen, leaseAtt, id, key), nil, nil),
		u.b.Set(leaseKey(nil, u.gen, leaseOfKy, 0, key), binary.LittleEndian.AppendUint64(nil, id), nil),
	)
}

// Detach removes key from the lease it is attached to, if any, and
// returns that lease's id (0: none).
func (u *Update) Detach(key []byte) (uint64, error) {
	id, err := u.KeyLease(key)
	if err != nil || id == 0 {
		return 0, err
	}
	u.noteKeyLease(key, 0)
	errs := []error{
		u.b.Delete(leaseKey(nil, u.gen, leaseAtt, id, key), nil),
		u.b.Delete(leaseKey(nil, u.gen, leaseOfKy, 0, key), nil),
	}
	if l, ok, err := u.Lease(id); err != nil {
		errs = append(errs, err)
	} else if ok && l.Keys > 0 {
		l.Keys--
		errs = append(errs, u.SetLease(l))
	}
	return id, errors.Join(errs...)
}

// RevokeLease deletes lease id, and every key attached to it from the KV
// state, in this Update; it returns the keys deleted (copies) and whether
// the lease existed.
func (u *Update) RevokeLease(id, rev uint64) (keys [][]byte, existed bool, err error) {
	if _, ok, err := u.Lease(id); err != nil || !ok {
		return nil, false, err
	}
	lo := leaseKey(nil, u.gen, leaseAtt, id, nil)
	hi := leaseKey(nil, u.gen, leaseAtt, id+1, nil)
	if id == ^uint64(0) {
		hi = leaseKey(nil, u.gen, leaseAtt+1, 0, nil)[:leaseKeyHeader+1]
	}
	r, err := u.reader()
	if err != nil {
		return nil, true, err
	}
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, true, err
	}
	for ok := it.First(); ok; ok = it.Next() {
		keys = append(keys, append([]byte(nil), it.Key()[len(lo):]...))
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return nil, true, err
	}
	for _, k := range keys {
		if _, err := u.Delete(k, rev); err != nil {
			return nil, true, err
		}
		u.noteKeyLease(k, 0)
		if err := u.b.Delete(leaseKey(nil, u.gen, leaseOfKy, 0, k), nil); err != nil {
			return nil, true, err
		}
	}
	return keys, true, errors.Join(
		u.b.DeleteRange(lo, hi, nil),
		u.b.Delete(leaseKey(nil, u.gen, leaseRec, id, nil), nil),
	)
}

// Leases returns every applied lease, in id order.
func (s *Store) Leases() ([]Lease, error) {
	s.genMu.RLock()
	gen := s.gen
	it, err := s.db.NewIter(leaseRecBounds(gen))
	s.genMu.RUnlock()
	if err != nil {
		return nil, err
	}
	defer it.Close()
	return readLeases(it)
}

// leaseRecBounds bounds the lease records of generation gen.
func leaseRecBounds(gen uint64) *pebble.IterOptions {
	lo := leaseKey(nil, gen, leaseRec, 0, nil)[:leaseKeyHeader+1]
	return &pebble.IterOptions{LowerBound: lo, UpperBound: append(lo[:leaseKeyHeader:leaseKeyHeader], leaseRec+1)}
}

// readLeases decodes every lease record it (bounded by leaseRecBounds)
// holds, in id order.
func readLeases(it *pebble.Iterator) ([]Lease, error) {
	var out []Lease
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) != leaseKeyHeader+1+8 {
			return nil, fmt.Errorf("%w: lease key %x", ErrCorrupt, k)
		}
		l, err := decodeLease(binary.BigEndian.Uint64(k[leaseKeyHeader+1:]), it.Value())
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, it.Error()
}

// ForEachLease calls fn with every lease record of the checkpoint (the key
// after its generation header, and the stored value), in key order: what
// a snapshot transfer sends besides the keys (Staged.AddLease).
func (c *Checkpoint) ForEachLease(fn func(key, raw []byte) error) error {
	return c.scan(leaseGenPrefix(c.gen), leaseGenEnd(c.gen), leaseKeyHeader, fn)
}

// AddLease stages one lease record as ForEachLease gave it.
func (st *Staged) AddLease(key, raw []byte) error {
	if !validLeaseRecord(key, raw) {
		return fmt.Errorf("%w: staged lease record %x = %x", ErrCorrupt, key, raw)
	}
	return st.set(append(append(st.keyBuf[:0], leaseGenPrefix(st.gen)...), key...), raw)
}

// validLeaseRecord reports whether (key, raw), a record after its
// generation header, has a lease record's shape.
func validLeaseRecord(key, raw []byte) bool {
	if len(key) == 0 {
		return false
	}
	switch key[0] {
	case leaseRec:
		return len(key) == 9 && len(raw) == 16
	case leaseAtt:
		return len(key) > 9 && len(raw) == 0
	case leaseOfKy:
		return len(key) > 1 && len(raw) == 8
	}
	return false
}
