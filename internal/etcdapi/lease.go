package etcdapi

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/kvd-project/kvd/client"
)

// etcdMaxLeaseTTL is etcd's largest lease TTL in seconds (its
// MaxLeaseTTL); kvd's own, client.MaxLeaseTTL, is smaller, and a TTL
// past either gets etcd's "too large lease TTL".
const etcdMaxLeaseTTL = 9_000_000_000

// leaseService implements etcd's Lease service.
type leaseService struct {
	pb.UnimplementedLeaseServer
	s *Server

	// rev is the highest store revision a lease call read: the header
	// revision of keep-alive responses whose renewal answered none.
	rev atomic.Uint64
}

// ttlOf is the TTL a grant of ttl seconds gets: etcd raises one below its
// minimum to the minimum (kvd's client.MinLeaseTTL here), and refuses one
// past its maximum.
func ttlOf(ttl int64) (time.Duration, error) {
	minTTL := int64(client.MinLeaseTTL / time.Second)
	if ttl < minTTL {
		ttl = minTTL
	}
	if ttl > etcdMaxLeaseTTL || time.Duration(ttl)*time.Second > client.MaxLeaseTTL {
		return 0, rpctypes.ErrGRPCLeaseTTLTooLarge
	}
	return time.Duration(ttl) * time.Second, nil
}

// seconds is d in whole seconds, rounded up: a lease lives at least that.
func seconds(d time.Duration) int64 { return int64((d + time.Second - 1) / time.Second) }

// header is the response header for a lease call, at the store revision
// read after it.
func (ls *leaseService) header(ctx context.Context) *pb.ResponseHeader {
	if rev, err := ls.s.currentRevision(ctx); err == nil {
		ls.learn(rev)
	}
	return ls.s.header(ls.rev.Load())
}

// learn raises rev, the highest store revision a lease call read, to
// at least got.
func (ls *leaseService) learn(got uint64) {
	for cur := ls.rev.Load(); got > cur && !ls.rev.CompareAndSwap(cur, got); cur = ls.rev.Load() {
	}
}

// LeaseGrant grants a lease with the request's ID, or (ID 0) one the
// leader picks; etcd's "lease already exists" if the ID is taken.
func (ls *leaseService) LeaseGrant(ctx context.Context, r *pb.LeaseGrantRequest) (*pb.LeaseGrantResponse, error) {
	ttl, err := ttlOf(r.TTL)
	if err != nil {
		return nil, err
	}
	id, err := ls.s.c.Grant(ctx, ttl, client.WithLeaseID(client.LeaseID(r.ID)))
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.LeaseGrantResponse{Header: ls.header(ctx), ID: int64(id), TTL: seconds(ttl)}, nil
}

// LeaseRevoke revokes a lease and deletes its keys; etcd's "requested
// lease not found" if it does not exist.
func (ls *leaseService) LeaseRevoke(ctx context.Context, r *pb.LeaseRevokeRequest) (*pb.LeaseRevokeResponse, error) {
	if err := ls.s.c.Revoke(ctx, client.LeaseID(r.ID)); err != nil {
		return nil, toStatus(err)
	}
	return &pb.LeaseRevokeResponse{Header: ls.header(ctx)}, nil
}

// LeaseKeepAlive renews leases, one request at a time in order, as etcd's:
// each answered with the lease's TTL, or TTL 0 if it does not exist.
// Other errors end the stream (clientv3 opens another).
func (ls *leaseService) LeaseKeepAlive(stream pb.Lease_LeaseKeepAliveServer) error {
	ctx := stream.Context()
	for {
		req, err := stream.Recv()
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return err
		}
		// The header's revision is the one the leader renewed the lease
		// at, as etcd's is its store's: read before the renewal, so a
		// lease revoked at some revision is never shown renewed after it.
		// A lease not found, or a leader that predates it, answers none:
		// then the last revision this front learned.
		resp := &pb.LeaseKeepAliveResponse{ID: req.ID}
		r, err := ls.s.c.Renew(ctx, client.LeaseID(req.ID))
		switch {
		case errors.Is(err, client.ErrLeaseNotFound):
		case err != nil:
			return toStatus(err)
		default:
			resp.TTL = seconds(r.TTL)
		}
		rev := r.Revision
		if rev == 0 {
			rev = ls.rev.Load()
		}
		ls.learn(rev)
		resp.Header = ls.s.header(rev)
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}

// LeaseTimeToLive reports a lease: TTL -1 if it does not exist, as
// etcd's. With Keys, its keys are found by a scan of the whole keyspace
// at one revision (kvd's client has no per-lease key index), bounded by
// the lease's key count.
func (ls *leaseService) LeaseTimeToLive(ctx context.Context, r *pb.LeaseTimeToLiveRequest) (*pb.LeaseTimeToLiveResponse, error) {
	info, err := ls.s.c.TimeToLive(ctx, client.LeaseID(r.ID))
	switch {
	case errors.Is(err, client.ErrLeaseNotFound):
		return &pb.LeaseTimeToLiveResponse{Header: ls.header(ctx), ID: r.ID, TTL: -1}, nil
	case err != nil:
		return nil, toStatus(err)
	}
	resp := &pb.LeaseTimeToLiveResponse{Header: ls.header(ctx), ID: r.ID,
		TTL: int64(info.Remaining / time.Second), GrantedTTL: seconds(info.TTL)}
	if r.Keys && info.Keys > 0 {
		if resp.Keys, err = ls.leaseKeys(ctx, info.ID, info.Keys); err != nil {
			return nil, toStatus(err)
		}
	}
	return resp, nil
}

// leaseKeysPage is the keys read per page of LeaseTimeToLive's scan.
const leaseKeysPage = 1000

// leaseKeys finds the keys attached to lease id, up to want of them.
func (ls *leaseService) leaseKeys(ctx context.Context, id client.LeaseID, want uint64) ([][]byte, error) {
	var keys [][]byte
	var rev uint64
	var start []byte // the first key
	for {
		opts := []client.ReadOption{client.WithKeysOnly(), client.WithLimit(leaseKeysPage), client.WithoutCount()}
		if rev != 0 {
			opts = append(opts, client.WithRev(rev))
		}
		page, err := ls.s.c.Range(ctx, start, nil, opts...)
		if err != nil {
			return nil, err
		}
		rev = page.Revision
		for _, kv := range page.KVs {
			if kv.Lease == id {
				keys = append(keys, kv.Key)
			}
		}
		if !page.More || uint64(len(keys)) >= want || len(page.KVs) == 0 {
			return keys, nil
		}
		start = page.Next
	}
}

// LeaseLeases lists the leases that exist.
func (ls *leaseService) LeaseLeases(ctx context.Context, _ *pb.LeaseLeasesRequest) (*pb.LeaseLeasesResponse, error) {
	ids, err := ls.s.c.Leases(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &pb.LeaseLeasesResponse{Header: ls.header(ctx), Leases: make([]*pb.LeaseStatus, len(ids))}
	for i, id := range ids {
		resp.Leases[i] = &pb.LeaseStatus{ID: int64(id)}
	}
	return resp, nil
}
