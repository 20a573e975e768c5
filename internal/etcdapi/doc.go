// Package etcdapi serves etcd's v3 gRPC API (the KV, Watch, Lease, Cluster,
// Maintenance and Auth services of go.etcd.io/etcd/api/v3/etcdserverpb) on
// top of kvd's client library, so that unmodified etcd clients and tools
// (etcdctl, clientv3, python3-etcd3, etcd's benchmark) work against kvd.
//
// The same Server runs in two places. A kvd node serves it on
// --listen-client-urls with a client of its own cluster; `kvd gateway`
// serves it in a process beside the application, where the client's
// one-sided path (RDMA READs of the leader's region) answers reads, so an
// etcd client reaches a one-sided linearizable GET over loopback gRPC.
//
// It owns the mapping only: etcd's messages to kvd's client calls, kvd's
// errors to etcd's gRPC statuses (errors.go), the response header
// (header.go) and the revision numbering (revision.go: etcd's is kvd's + 1).
// Semantics (revisions, transactions, watches, leases) are the
// store's; where they differ from etcd's, docs/etcd-compatibility.md says
// how.
package etcdapi
