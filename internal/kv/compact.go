package kv

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/kvd-project/kvd/internal/errs"
	"github.com/kvd-project/kvd/internal/store"
	"github.com/kvd-project/kvd/raft"
)

// Compaction of the stored history is a replicated command, so that every
// member compacts at the same revision and a watch or a past read gets
// the same answer from each: opCompact's value is the le64 revision.
// Physical deletion then runs in the background on each member, in
// bounded batches (internal/store, compact.go), off the apply path.

// Compact replicates a compaction of the history to rev: reads and
// watches below rev then fail with errs.ErrCompacted. It fails with
// errs.ErrFutureRevision if rev is past the store revision and with
// errs.ErrCompacted if the history is compacted at rev or later, as etcd's
// Compact does. It returns the store revision when it was applied.
func (s *Store) Compact(ctx context.Context, rev uint64) (uint64, error) {
	if rev == 0 {
		return 0, fmt.Errorf("%w: compaction to revision 0", errs.ErrBadRequest)
	}
	r, err := s.node.Propose(ctx, raft.Admission{}, command{op: opCompact, value: binary.LittleEndian.AppendUint64(nil, rev)}.encoder())
	res, _ := r.Value.(writeResult)
	return res.rev, err
}

// applyCompact applies a compaction in u; a refused one is its
// proposer's error, the same on every member.
func (m *machine) applyCompact(u *store.Update, index uint64, c command) error {
	if len(c.value) != 8 {
		m.log.Error("skipping malformed compaction", "index", index, "bytes", len(c.value))
		m.complete(c, raft.Outcome{Index: index, Err: errBadCommand})
		return nil
	}
	rev := binary.LittleEndian.Uint64(c.value)
	err := u.Compact(rev)
	switch {
	case errors.Is(err, errs.ErrCompacted), errors.Is(err, errs.ErrFutureRevision):
		m.complete(c, raft.Outcome{Index: index, Err: err})
		return nil
	case err != nil:
		return err
	}
	m.metrics.compactions.Inc()
	m.complete(c, raft.Outcome{Index: index, Value: writeResult{rev: m.served()}})
	return nil
}

// Auto-compaction modes (Config.AutoCompactionMode), as etcd's
// --auto-compaction-mode.
const (
	CompactPeriodic = "periodic"
	CompactRevision = "revision"
)

// Defaults of the auto-compaction: keep an hour of history. etcd keeps
// all of it unless told otherwise; kvd bounds it by default because the
// history travels in every snapshot a follower installs.
const (
	DefaultAutoCompactionMode      = CompactPeriodic
	DefaultAutoCompactionRetention = "1h"
	// revisionCheckEvery is how often revision mode compacts, as etcd's
	// revision compactor (every five minutes).
	revisionCheckEvery = 5 * time.Minute
)

// compactPolicy is the parsed auto-compaction: keep period of history
// (periodic) or the last revs revisions (revision); neither: off.
type compactPolicy struct {
	period time.Duration
	revs   uint64
}

// CheckAutoCompaction reports whether mode and retention ("" for their
// defaults) are a valid auto-compaction (Config.AutoCompactionMode and
// AutoCompactionRetention).
func CheckAutoCompaction(mode, retention string) error {
	_, err := parseAutoCompaction(cmp.Or(mode, DefaultAutoCompactionMode), cmp.Or(retention, DefaultAutoCompactionRetention))
	return err
}

// parseAutoCompaction reads etcd's flag pair: periodic takes a duration
// ("1h", "30m") or a bare number of hours ("1"); revision a number of
// revisions. Retention "0" turns auto-compaction off.
func parseAutoCompaction(mode, retention string) (compactPolicy, error) {
	retention = strings.TrimSpace(retention)
	switch mode {
	case CompactPeriodic:
		if h, err := strconv.ParseUint(retention, 10, 32); err == nil {
			return compactPolicy{period: time.Duration(h) * time.Hour}, nil
		}
		d, err := time.ParseDuration(retention)
		if err != nil || d < 0 {
			return compactPolicy{}, fmt.Errorf("auto-compaction retention %q: want a duration (1h, 30m) or hours (1)", retention)
		}
		return compactPolicy{period: d}, nil
	case CompactRevision:
		n, err := strconv.ParseUint(retention, 10, 64)
		if err != nil {
			return compactPolicy{}, fmt.Errorf("auto-compaction retention %q: want a number of revisions in revision mode", retention)
		}
		return compactPolicy{revs: n}, nil
	}
	return compactPolicy{}, fmt.Errorf("auto-compaction mode %q: want %s or %s", mode, CompactPeriodic, CompactRevision)
}

// autoCompactor is the leader's auto-compaction: it samples the store
// revision as time passes and proposes a compaction to the revision the
// retention lets go. Only the leader runs it; a new leader starts over.
type autoCompactor struct {
	policy  compactPolicy
	samples []revSample // periodic: one every period/10, oldest first
	next    time.Time   // when to sample or check next
}

type revSample struct {
	at  time.Time
	rev uint64
}

func (a *autoCompactor) reset() { a.samples, a.next = a.samples[:0], time.Time{} }

// due returns the revision to compact to now (0: none), given the store
// and compaction revisions.
func (a *autoCompactor) due(now time.Time, rev, compacted uint64) uint64 {
	p := a.policy
	if p.period == 0 && p.revs == 0 || now.Before(a.next) {
		return 0
	}
	if p.revs > 0 {
		a.next = now.Add(revisionCheckEvery)
		if rev > p.revs && rev-p.revs > compacted {
			return rev - p.revs
		}
		return 0
	}
	step := max(p.period/10, time.Millisecond)
	a.next = now.Add(step)
	a.samples = append(a.samples, revSample{now, rev})
	target := uint64(0)
	for len(a.samples) > 0 && now.Sub(a.samples[0].at) >= p.period {
		target = a.samples[0].rev
		a.samples = a.samples[1:]
	}
	if target > compacted {
		return target
	}
	return 0
}

// autoCompact is the leader's tick: it proposes the compaction that is
// due, if any. Nobody waits for it; a refused one (raced by another) is
// harmless.
func (m *machine) autoCompact(propose func(raft.Encode)) {
	rev := m.auto.due(m.cfg.LeaseClock(), m.st.Revision(), m.st.CompactRevision())
	if rev == 0 {
		return
	}
	m.log.Info("auto-compacting the history", "revision", rev)
	propose(command{op: opCompact, value: binary.LittleEndian.AppendUint64(nil, rev)}.encoder())
}
