// Package concurrency is a lock recipe on kvd's TTL leases and
// compare-and-swap, in the shape of etcd's clientv3/concurrency: a Session
// owns a lease that it keeps alive, and a Mutex held in a Session is a key
// created with the session's lease only if it did not exist (mod
// revision 0), deleted by Unlock, or by the lease's end if the holder
// dies.
//
// # Safety
//
// Two Lock calls never both succeed for one key at the same time: only
// one create of a missing key can apply, and the next one can apply only
// once the key is deleted, by Unlock or by the end of the holder's lease.
// The end of a lease is where every lease-based lock (etcd's included)
// needs care: once the lease is gone, another session can take the lock
// while the old holder still believes it holds it. A holder must
// therefore stop acting as the holder when Mutex.Held turns false: before
// Session.ValidUntil, the send time of its last answered keepalive plus
// the TTL, which the server guarantees the lease outlives (internal/kv/lessor.go),
// and as soon as its session learns the lease is gone (Session.Done).
// Between the lease's loss and the holder noticing, only fencing protects
// what the lock guards: Mutex.Version is a fencing token (the store
// revision of the write that created the lock key, its create and mod
// revision, larger for every later holder; not etcd's per-key version,
// which is 1 for every holder); a resource
// that remembers the largest token it has seen and refuses smaller ones
// is safe even then. A revoke by someone else (kvctl lease revoke) ends a
// lease at once, without waiting for its TTL: the holder learns of it at
// its next keepalive, at most a third of the TTL later.
//
// The lock is not fair: waiters poll (Config.Poll) and whoever creates the
// key first after it is deleted wins.
package concurrency
