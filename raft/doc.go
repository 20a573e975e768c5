// Package raft is kvd's replication driver: it replicates a state machine
// with etcd raft (go.etcd.io/raft/v3) and keeps everything durable in one
// Pebble database per node (internal/store). It owns the loop, Ready
// handling, proposal batching and admission, reads (ReadIndex and the read
// lease) and membership. What is replicated is a StateMachine
// (statemachine.go) the loop calls, one interface with no optional parts:
// kvd's is the key/value state machine of internal/kv, which evaluates the
// commands, keeps the TTL leases and publishes applied writes to the
// server's region. The server publishes the Node's read lease (OnLease) in
// the region's lease word.
//
// # The loop
//
// One goroutine owns the raft.RawNode. Each iteration it waits for work
// (a tick, a proposal, a peer message, a read barrier, a transfer report),
// takes any ticks that are due first, drains whatever else is queued (so
// concurrent Puts share one Ready: the commands taken are proposed as one
// raft message of at most maxBatch commands and MaxSizePerMsg bytes, see
// batch.go), and then handles every Ready in order:
//
//  1. Write the Ready's snapshot (if any), log entries and HardState, and
//     the effects of its committed entries with the new applied index, in
//     ONE Pebble batch, fsynced once if raft asks for it (group commit).
//     A restart never sees half an apply. (With Config.RaftLog "wal", the
//     default, the log entries and HardState go to a log of their own,
//     fsynced once, and the rest to Pebble unsynced; a restart replays the
//     log from the applied index Pebble persisted:
//     internal/store/raftlog.go.) The loop
//     applies membership
//     changes itself and hands the batch and the committed entries to
//     StateMachine.Apply, which evaluates its commands into the batch
//     (a transaction against the batch as built so far) and returns each
//     entry's outcome. A state machine that will publish writes tells its
//     cache before returning (internal/kv: Publisher.BatchAhead).
//  2. Send the Ready's messages, only now that what they promise is
//     durable (but see Pipelining).
//  3. Call StateMachine.Committed (after the commit, so the region never
//     shows a write a crash could lose; it says whether a snapshot was
//     installed, for the state machine to reload), and complete the local
//     callers whose entries were applied with their outcomes (a Propose
//     returns only then, with the entry's raft index).
//  4. Release ReadIndex callers and lease grants whose index is applied.
//  5. Advance; then snapshot and compact the log every SnapshotCount
//     entries.
//
// # Pipelining
//
// Two reorderings take the leader's fsync off a write's critical path
// (handleReady, ready.go; the Raft thesis, section 10.2.1):
//
//   - A leader sends its messages before its own fsync when the Ready
//     changes neither its term nor its vote, so followers write an entry
//     while the leader does. This is safe because the loop steps nothing
//     until the Ready is handled: followers' acknowledgements can advance
//     the commit index only after the leader's own copy is durable, so the
//     leader never counts an entry it could still lose in a quorum.
//   - A Ready whose committed entries were all durable before it (below
//     the durable log end and not rewritten by its own entries) reports
//     them (step 3) while its fsync, of newer entries, runs: Pebble applies
//     the batch at once and syncs the WAL in the background
//     (Update.CommitNoSyncWait, SyncWait). Those writes are durable in the
//     log and committed, so a crash cannot lose them; the loop waits for
//     the fsync before it sends a follower's messages or Advances.
//
// # Peers
//
// The peer layer is its own package, raft/peer: the connections to the
// other members (a sender per peer, the sessions they open here), the wire
// format, snapshot streaming, the cluster identity and the filter every
// peer message passes. The loop reaches it through peerNetwork
// (network.go) and the peer layer reaches the node through peer.Host.
//
// The loop never blocks on the network: each peer has a sender goroutine
// with a bounded queue, and a full queue drops the message and reports the
// peer unreachable. Snapshots travel as a stream of bounded chunks read
// from a Pebble snapshot taken at the raft snapshot's index, followed by
// the MsgSnap, every frame tagged with the transfer's id (raft/peer's
// wire.go); the receiver stages the chunks of one transfer under a fresh
// key generation, ignores frames of any other, and installs the data
// atomically when raft accepts the MsgSnap. A peer is sent one transfer at
// a time: a new MsgSnap for it, or a change of term or leadership
// (handleReady calls AbortTransfers), aborts the transfer under way
// (reported to raft as failed unless raft has since sent a newer one).
// Every peer connection, dialled or served, must carry the largest message
// raft may send on it (see Config.MaxSizePerMsg; checkMessageLimit), or it
// is refused. A message from a peer passes the peer layer's filter on its
// session's goroutine, then the loop's own (filter_loop.go), which checks
// what it claims about the log, before raft steps it.
//
// # The lease
//
// Clients read the leader's region with one-sided READs, without the
// leader's CPU, so they need to know the leader is still the leader: the
// region carries a lease word that this package drives through OnLease.
//
// Every tick the leader issues a raft ReadIndex whose context names its
// send time t (read on the leader's monotonic clock before the request).
// raft answers it only after a quorum acknowledged a heartbeat broadcast
// after t. Each acknowledging follower reset its election timer on that
// heartbeat, at some time after t, and (CheckQuorum being on) it ignores
// every vote and pre-vote request until ElectionTicks of its own ticks have
// passed since. The loop takes every tick that is due before it steps a
// message, so only tick deadlines after the heartbeat count, and
// ElectionTicks of them span more than (ElectionTicks-1) tick intervals of
// the follower's clock. Any new leader needs a quorum of votes, and every
// quorum shares a node with the acknowledging one, so no other leader can
// exist before t + (ElectionTicks-1)*TickInterval by the followers' clocks.
// The leader holds the lease until
//
//	t + ElectionTicks*TickInterval*(1-LeaseDrift) - TickInterval
//
// by its own clock, which is earlier as long as no follower's clock runs
// more than LeaseDrift faster than the leader's. A lease is granted only
// once the acknowledged read index is applied, so the region already shows
// every write acknowledged before t. A node that restarts ignores vote
// requests for an election timeout, because it forgot which heartbeats it
// acknowledged before the restart.
//
// The slack between the lease's end and the earliest new leader, by the
// leader's clock, is all the lease has to spare. With E = ElectionTicks,
// I = TickInterval, D = LeaseDrift and a follower's clock running r times
// as fast as the leader's, the follower's (E-1)*I take (E-1)*I/r of the
// leader's clock, so the slack is
//
//	(E-1)*I/r - (E*I*(1-D) - I)
//
// It is E*I*D only at r = 1 (100ms with the defaults); at the bound,
// r = 1+D, it is I*D*(1+E*D)/(1+D) (18.2ms), and it reaches zero at
// r = (E-1)/(E*(1-D)-1) (1.125 with the defaults), beyond which a new
// leader can overlap the lease.
//
// Tested by the deterministic scenarios in testdata/lease, run by
// TestLeaseScenarios (scenario_test.go) on the scenario harness
// (harness_test.go): nodes running this package's loop, one iteration at a
// time, on in-memory Pebble, fake clocks (Knobs.Clock) and a network the
// scenario controls, checking after every iteration that no published
// lease is unexpired when another node leads, or has committed in, a later
// term. drift_bound.txt and drift_beyond.txt measure the slack above
// (18.4ms at r = 1.1, 0.2ms at 1.125, an overlap at 1.15); the others
// cover an isolated or frozen leader, a frozen or restarted follower, slow
// acknowledgements and leader transfer. That a grant waits for its apply
// (which this loop never makes it do) is TestLeaseGrantWaitsForApply's.
//
// The lease is published as its expiry, an absolute time on this node's
// monotonic clock (OnLease(term, expiry); the server stores it in the
// region's header as nanoseconds of internal/monoclock), never as a flag
// that the node would have to clear in time. Clients judge the expiry on
// their own clocks (docs/consistency.md), so a lease ends at its expiry
// however late the publication was made and whatever this process does
// afterwards: a node frozen by SIGSTOP, a stop-the-world pause or a
// scheduler stall, whose memory an RDMA NIC keeps serving, is trusted for
// at most the rest of its last lease. Assumption: clock rates differ by at
// most LeaseDrift (clocks need not agree), between nodes and between nodes
// and clients.
//
// Time is read from Go's monotonic clock, which on Linux is CLOCK_MONOTONIC:
// it does not advance while the host is suspended, nor, depending on the
// hypervisor, while a VM is paused (for a snapshot or a live migration).
// Such a pause breaks the clock-rate assumption by its whole length, which
// no LeaseDrift absorbs: a leader resumed from one counts none of the time
// it was gone, so it can take a lease its followers' clocks ended long ago
// as still valid and serve stale reads until it hears of the new leader.
// Do not suspend or pause the host or VM of a leader (stop its process
// first, so that another node takes over). Measuring the lease on
// CLOCK_BOOTTIME, which counts suspended time, would close this for host
// suspend.
//
// When the node steps down or the term changes, the loop publishes a zero
// expiry at once (Status().LeaseValid turns false in the same step). Safety
// does not depend on it. By the argument above no other leader can be
// elected before the lease's expiry, whatever this node does, and a node
// that has stepped down commits no more writes itself, so the region stays
// current until the expiry. Nor does any way of stepping down end a lease
// early in a way that matters: CheckQuorum steps down only once no quorum
// has answered for an election timeout, after the lease lapsed; a higher
// term takes a quorum of granted pre-votes, and every quorum includes a
// follower that refuses them until the lease lapsed; a leader removed from
// the configuration leaves the group without a leader until an election
// that cannot succeed sooner; and a peer cannot make a follower campaign
// early: MsgTransferLeader from peers is dropped, and a MsgTimeoutNow or a
// transfer's vote reaches raft only as a leader transfer allows it.
//
// Leader transfer (Node.TransferLeadership) makes the target campaign at
// once and the voters grant its vote inside the lease, so the leader
// first gives its lease up: it stops extending it, waits out the expiry
// it published, and only then appends a marker to the log that the voters
// require before they grant a transfer's vote (transfer.go).
//
// # The state machine's timers
//
// The loop calls StateMachine.Lead when this node becomes or stops being
// the leader, and StateMachine.Tick on the leader once per iteration that
// took ticks, with a way to propose commands of its own: internal/kv's
// TTL leases (not to be confused with the read lease above) are timed by
// the leader only, restarted at full TTL when it takes over, and expired
// by a revoke command it proposes (internal/kv/lessor.go has the safety
// argument).
package raft
