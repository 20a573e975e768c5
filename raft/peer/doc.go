// Package peer is the raft node's peer layer (as etcd's rafthttp): the
// connections between the members of a cluster and what travels on them.
//
// It owns:
//
//   - the senders (sender.go): one goroutine and one connection per peer,
//     dialled lazily and redialled with backoff, fed by the raft loop
//     without ever blocking it (a full queue drops the message);
//   - snapshot streaming (snapshot.go): a raft snapshot travels as a
//     stream of bounded chunks read from a Pebble checkpoint, one transfer
//     per peer at a time, aborted by a newer one or a change of term or
//     leadership; the receiver stages a transfer's data and hands it to
//     raft with the MsgSnap that ends it;
//   - the sessions (serve.go): the connections peers dialled to this node,
//     each decoded by a Reader;
//   - the wire format (wire.go): the hello and the frames;
//   - the cluster identity (identity.go): the id every hello carries, and
//     how a node settles or learns it;
//   - telling a removed member it was removed (removal.go): the farewell
//     from members that apply its removal, and the answer to its hello;
//   - the filter (filter.go): which sessions are admitted and which
//     messages reach raft, with the refusal and drop reasons counted in
//     kvd_raft_peer_refused_total and kvd_raft_peer_messages_dropped_total.
//
// It does not import the raft package: the node is a Host to it (where
// messages are delivered, where send failures are reported, who is a
// member). The raft loop's own half of the filter, which checks messages
// against the log, is raft's (raft/filter_loop.go).
package peer
