package kvdtest

import "time"

// Freeze freezes the node for d through its fault endpoint
// (POST /debug/faults?freeze=d): its Raft loop, region writes and RPCs
// stop, as under SIGSTOP, while its region still answers one-sided READs,
// as an RDMA NIC's would. It returns at once; the node thaws by itself.
// SIGSTOP itself (see Pid) would also stop the TCP transport's READ
// service, which an RDMA NIC does not stop.
func (p *Proc) Freeze(d time.Duration) error {
	return p.fault("freeze=" + d.String())
}
