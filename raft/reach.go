package raft

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Peer reachability: what an operator needs to see a member or learner
// that is down or cut off, on any node, before it matters (a removal that
// would leave no quorum, a promotion that cannot happen).
//
// Every node notes when it last received a message from each member
// (the loop's step). The leader hears from every member at every
// heartbeat, so it judges them all; a follower hears from the leader
// alone, so it judges the leader. Once a tick the loop publishes, per
// member (learners included), kvd_peer_last_contact_seconds (since the
// last message; absent until one came) and, for the members this node
// expects to hear from, kvd_peer_reachable (1 if heard from within an
// election timeout). The leader logs a warning for each member it has not
// heard from within an election timeout, once per ratelog.DefaultEvery
// while that lasts.

// reachMetrics are the per-peer series.
type reachMetrics struct {
	reachable, lastContact *prometheus.GaugeVec
}

func newReachMetrics() reachMetrics {
	return reachMetrics{
		reachable: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kvd_peer_reachable",
			Help: "1 if this node heard from member peer within an election timeout (the leader judges every member, a follower its leader).",
		}, []string{"peer"}),
		lastContact: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kvd_peer_last_contact_seconds",
			Help: "Seconds since this node last received a message from member peer (absent: none yet).",
		}, []string{"peer"}),
	}
}

func (r reachMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{r.reachable, r.lastContact}
}

// reach is the loop's record of contacts, by member.
type reach struct {
	contact   map[uint64]time.Time
	published map[uint64]bool // members with series
	leadSince time.Time       // when this node last became leader
}

// heard notes a message from member id at now (the loop's step).
func (r *reach) heard(id uint64, now time.Time) {
	if r.contact == nil {
		r.contact = make(map[uint64]time.Time)
	}
	r.contact[id] = now
}

// observePeers publishes the per-peer series and, on the leader, warns of
// members not heard from within an election timeout. The loop calls it
// once a tick.
func (l *loop) observePeers(now time.Time) {
	r := &l.reach
	if r.published == nil {
		r.published = make(map[uint64]bool)
	}
	m := l.n.metrics.reach
	timeout := l.cfg.electionTimeout()
	seen := make(map[uint64]bool, len(r.published))
	for _, mem := range l.st.Members() {
		id := mem.ID
		if id == l.n.id {
			continue
		}
		seen[id] = true
		r.published[id] = true
		label := strconv.FormatUint(id, 10)
		last, ok := r.contact[id]
		if ok {
			m.lastContact.WithLabelValues(label).Set(now.Sub(last).Seconds())
		}
		if !l.isLeader && id != l.lead {
			m.reachable.DeleteLabelValues(label)
			continue
		}
		up := ok && now.Sub(last) < timeout
		m.reachable.WithLabelValues(label).Set(boolGauge(up))
		if !up && l.isLeader && now.Sub(r.leadSince) >= timeout {
			l.warnUnreachable(mem.ID, mem.Addr, mem.IsLearner, last, ok, now)
		}
	}
	for id := range r.published {
		if !seen[id] {
			label := strconv.FormatUint(id, 10)
			m.reachable.DeleteLabelValues(label)
			m.lastContact.DeleteLabelValues(label)
			delete(r.published, id)
			delete(r.contact, id)
		}
	}
}

func (l *loop) warnUnreachable(id uint64, addr string, learner bool, last time.Time, ok bool, now time.Time) {
	if allow, _ := l.n.peerLog.Allow("unreachable:"+strconv.FormatUint(id, 10), now); !allow {
		return
	}
	role := "member"
	if learner {
		role = "learner"
	}
	since := "never"
	if ok {
		since = now.Sub(last).Round(time.Millisecond).String() + " ago"
	}
	l.n.log.Warn(role+" unreachable: the leader has not heard from it within an election timeout",
		"peer", id, "addr", addr, "learner", learner, "last_contact", since)
}
