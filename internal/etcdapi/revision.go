package etcdapi

import "math"

// etcd's store starts at revision 1 (an empty etcd answers header revision
// 1, and its first write gets revision 2); kvd's starts at 0 (its first
// write gets 1). etcd's clients build on etcd's numbering: clientv3's
// concurrency recipes (Mutex.Lock, Election.Campaign) wait for the keys
// created before theirs with WithMaxCreateRev(myRev-1), where 0 means "no
// bound", so a lock whose key was kvd's first write would wait for itself
// forever. Every revision that crosses the etcd API is therefore kvd's
// plus one: etcdRev going out, kvdRev coming in. kvd's own clients (kvctl,
// the Go client) see kvd's numbering.

// etcdRev is kvd store revision rev in etcd's numbering.
func etcdRev(rev uint64) int64 { return int64(min(rev, math.MaxInt64-1)) + 1 }

// kvdRev is etcd revision rev in kvd's numbering: rev-1, and 0 for a rev
// below 1 (etcd's 1, the empty store, is kvd's 0). Callers handle etcd's
// 0 ("latest", "no bound", "absent") and negatives before asking.
func kvdRev(rev int64) uint64 {
	if rev < 1 {
		return 0
	}
	return uint64(rev - 1)
}

// keyRev is a key's create or mod revision in etcd's numbering: 0 (no
// such key, or a field a delete event leaves unset) stays 0.
func keyRev(rev uint64) int64 {
	if rev == 0 {
		return 0
	}
	return etcdRev(rev)
}
