package raft

import (
	"time"

	"github.com/kvd-project/kvd/transport"
)

// refuse counts and logs a refused peer session, at most one line per
// reason per ratelog.DefaultEvery: a misconfigured or hostile peer retries
// without end, and the log must not become its amplifier.
func (ps *peerSet) refuse(why refusal, conn transport.Conn, err error) {
	ps.n.metrics.refused(why)
	if ok, held := ps.limit.Allow("refused:"+string(why), time.Now()); ok {
		ps.n.log.Warn("refusing peer connection", "reason", string(why), "remote", conn.RemoteAddr(),
			"err", err, "similar_refusals_not_logged", held)
	}
}

// dropped counts and logs (rate-limited) a dropped peer message.
func (ps *peerSet) dropped(why dropReason, peer uint64, err error) {
	ps.n.metrics.dropped(why)
	if ok, held := ps.limit.Allow("dropped:"+string(why), time.Now()); ok {
		ps.n.log.Warn("dropping peer message", "reason", string(why), "peer", peer,
			"err", err, "similar_drops_not_logged", held)
	}
}
