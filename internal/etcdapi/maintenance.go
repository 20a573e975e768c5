package etcdapi

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/backup"
)

// Version is the etcd version the Server reports (Status, Snapshot):
// the API it serves is etcd 3.7's, and clientv3 refuses servers older
// than the release before its own (RejectOldCluster).
const Version = "3.7.0"

// StorageVersion is the storage version reported: etcd's for 3.7. kvd's
// storage is its own (Pebble); the field tells etcd's tools which
// features the data supports, and kvd supports those of the API served.
const StorageVersion = "3.7.0"

// noSpaceFill is the table fill at which a member reports etcd's NOSPACE
// alarm: above it, all but the smallest writes are refused.
const noSpaceFill = 0.99

// snapshotChunk is the size of one SnapshotResponse blob, etcd's 32 KiB.
const snapshotChunk = 32 << 10

// maintenanceService implements etcd's Maintenance service.
type maintenanceService struct {
	pb.UnimplementedMaintenanceServer
	s *Server
}

func (m *maintenanceService) Status(ctx context.Context, _ *pb.StatusRequest) (*pb.StatusResponse, error) {
	st, _, err := m.s.ownStatus(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	m.s.term.Store(st.Term)
	resp := &pb.StatusResponse{
		Header: m.s.header(0), Version: Version, StorageVersion: StorageVersion,
		DbSize: int64(st.DBSize), DbSizeInUse: int64(st.DBSize),
		Leader: st.LeaderID, RaftIndex: st.Commit, RaftTerm: st.Term, RaftAppliedIndex: st.Applied,
		IsLearner: st.IsLearner,
	}
	resp.Header.MemberId = st.ID
	if st.StorageError != "" {
		resp.Errors = append(resp.Errors, "storage: "+st.StorageError)
	}
	if st.TableFill >= noSpaceFill {
		resp.Errors = append(resp.Errors, "memberID:"+fmt.Sprint(st.ID)+" alarm:NOSPACE")
	}
	return resp, nil
}

// ownStatus is the status of the member this Server runs on
// (Config.MemberID), or, for a gateway, of the leader; addr is where kvd
// clients reach it.
func (s *Server) ownStatus(ctx context.Context) (st client.NodeStatus, addr string, err error) {
	ms, err := s.c.Members(ctx)
	if err != nil {
		return st, "", err
	}
	if self := s.cfg.MemberID; self != 0 {
		for _, m := range ms {
			if m.ID == self {
				st, err = s.c.Status(ctx, clientAddr(m))
				return st, clientAddr(m), err
			}
		}
		return st, "", fmt.Errorf("%w: this node (member %d) is not a member", client.ErrUnavailable, self)
	}
	var lastErr error
	for _, m := range ms {
		if st, err = s.c.Status(ctx, clientAddr(m)); err != nil {
			lastErr = err
			continue
		}
		if st.LeaderID == st.ID || st.LeaderID == 0 {
			return st, clientAddr(m), nil
		}
		for _, l := range ms {
			if l.ID == st.LeaderID {
				if lst, err := s.c.Status(ctx, clientAddr(l)); err == nil {
					return lst, clientAddr(l), nil
				}
			}
		}
		return st, clientAddr(m), nil
	}
	return st, "", fmt.Errorf("%w: no member answered a status request (last error: %w)", client.ErrUnavailable, lastErr)
}

// clientAddr is where kvd clients reach m: its announced client address,
// else its peer address (the same listener unless it has a peer one).
func clientAddr(m client.Member) string {
	if m.ClientAddr != "" {
		return m.ClientAddr
	}
	return m.Addr
}

// alarms are the members' current conditions as etcd's alarms: a full
// table is NOSPACE, a storage failure CORRUPT (the member stopped
// serving; etcd's nearest). kvd's alarms are not latched: each is the
// member's state when asked. Members that do not answer are left out.
func (s *Server) alarms(ctx context.Context) ([]*pb.AlarmMember, error) {
	ms, err := s.c.Members(ctx)
	if err != nil {
		return nil, err
	}
	var out []*pb.AlarmMember
	for _, m := range ms {
		st, err := s.c.Status(ctx, clientAddr(m))
		if err != nil {
			continue
		}
		if st.TableFill >= noSpaceFill {
			out = append(out, &pb.AlarmMember{MemberID: m.ID, Alarm: pb.AlarmType_NOSPACE})
		}
		if st.StorageError != "" {
			out = append(out, &pb.AlarmMember{MemberID: m.ID, Alarm: pb.AlarmType_CORRUPT})
		}
	}
	return out, nil
}

// Alarm lists (GET) the alarms. ACTIVATE is refused: kvd's alarms are
// its members' conditions, which a request cannot raise. DEACTIVATE
// succeeds once the condition is gone (keys deleted, the member
// restarted) and is refused while it holds, since nothing latched is
// left to clear.
func (m *maintenanceService) Alarm(ctx context.Context, r *pb.AlarmRequest) (*pb.AlarmResponse, error) {
	if m.s.cfg.Gateway && r.Action != pb.AlarmRequest_GET {
		return nil, notSupported("Alarm "+r.Action.String(), "a gateway only lists alarms")
	}
	all, err := m.s.alarms(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	match := func(a *pb.AlarmMember) bool {
		return (r.MemberID == 0 || a.MemberID == r.MemberID) && (r.Alarm == pb.AlarmType_NONE || a.Alarm == r.Alarm)
	}
	resp := &pb.AlarmResponse{Header: m.s.header(0)}
	switch r.Action {
	case pb.AlarmRequest_GET:
		for _, a := range all {
			if match(a) {
				resp.Alarms = append(resp.Alarms, a)
			}
		}
		return resp, nil
	case pb.AlarmRequest_ACTIVATE:
		return nil, notSupported("Alarm ACTIVATE", "kvd's alarms are its members' conditions (a full table, a storage failure), raised by nothing else")
	case pb.AlarmRequest_DEACTIVATE:
		for _, a := range all {
			if match(a) {
				return nil, status.Errorf(codes.FailedPrecondition,
					"etcdserver: member %d's %s condition still holds: kvd's alarms clear by themselves when it ends (NOSPACE: delete keys; CORRUPT: fix the disk and restart the member)",
					a.MemberID, a.Alarm)
			}
		}
		return resp, nil
	}
	return nil, invalid(fmt.Sprintf("unknown alarm action %d", r.Action))
}

// Defragment succeeds without doing anything: kvd's Pebble store has no
// free pages to give back (it reclaims space by compacting in the
// background), and its table region is a fixed size.
func (m *maintenanceService) Defragment(context.Context, *pb.DefragmentRequest) (*pb.DefragmentResponse, error) {
	return &pb.DefragmentResponse{Header: m.s.header(0)}, nil
}

func (m *maintenanceService) Hash(context.Context, *pb.HashRequest) (*pb.HashResponse, error) {
	return nil, notSupported("Hash", "etcd's Hash covers its whole backend file, which kvd does not have; HashKV hashes the keys and values")
}

// HashKV hashes the key-value state at a revision on the member Status
// reports (client.HashKV): the keys live at that revision with their
// values and metadata, not etcd's hash of every revision kept since the
// compaction, so it is comparable between kvd members only.
func (m *maintenanceService) HashKV(ctx context.Context, r *pb.HashKVRequest) (*pb.HashKVResponse, error) {
	if r.Revision < 0 {
		return nil, invalid("revision must not be negative")
	}
	st, addr, err := m.s.ownStatus(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	h, err := m.s.c.HashKV(ctx, addr, uint64(r.Revision))
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &pb.HashKVResponse{Header: m.s.header(h.HashRevision), Hash: h.Hash,
		CompactRevision: int64(h.CompactRevision), HashRevision: int64(h.HashRevision)}
	resp.Header.MemberId = st.ID
	return resp, nil
}

func (m *maintenanceService) MoveLeader(ctx context.Context, r *pb.MoveLeaderRequest) (*pb.MoveLeaderResponse, error) {
	if r.TargetID == 0 {
		return nil, rpctypes.ErrGRPCBadLeaderTransferee
	}
	if _, err := m.s.c.MoveLeader(ctx, r.TargetID); err != nil {
		return nil, toStatus(err)
	}
	return &pb.MoveLeaderResponse{Header: m.s.header(0)}, nil
}

func (m *maintenanceService) Downgrade(context.Context, *pb.DowngradeRequest) (*pb.DowngradeResponse, error) {
	return nil, notSupported("Downgrade", "kvd has no cluster version to downgrade; run the older kvd's binaries (docs/upgrading.md)")
}

// Snapshot streams a kvd backup (client.Snapshot: taken by the leader,
// checked as it arrives) in etcd's framing: zero padding to a multiple of
// 512 bytes, then the SHA-256 of every byte before it, which `etcdctl
// snapshot save` looks for. `kvd --restore` reads the file (internal/backup
// accepts that envelope); etcdutl cannot. RemainingBytes is not known
// until the end: it is 1 in every message but the last, which has 0.
func (m *maintenanceService) Snapshot(_ *pb.SnapshotRequest, stream grpc.ServerStreamingServer[pb.SnapshotResponse]) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		_, err := m.s.c.Snapshot(ctx, pw)
		pw.CloseWithError(cmpErr(err, io.EOF))
		done <- err
	}()
	sw := &snapshotSender{stream: stream, sum: sha256.New(), s: m.s}
	_, copyErr := io.CopyBuffer(sw, pr, make([]byte, snapshotChunk))
	pr.CloseWithError(errSnapshotSend) // a Snapshot blocked on a send that failed ends
	cancel()
	if err := <-done; err != nil {
		return toStatus(err)
	}
	if copyErr != nil {
		return copyErr
	}
	return sw.finish()
}

var errSnapshotSend = errors.New("etcdapi: snapshot stream to the client ended")

// cmpErr is err, or def when err is nil.
func cmpErr(err, def error) error {
	if err == nil {
		return def
	}
	return err
}

// snapshotSender sends what it is written as SnapshotResponse blobs,
// hashing them for the trailing checksum.
type snapshotSender struct {
	stream grpc.ServerStreamingServer[pb.SnapshotResponse]
	sum    hash.Hash
	n      int64
	s      *Server
}

func (w *snapshotSender) Write(b []byte) (int, error) {
	w.sum.Write(b)
	w.n += int64(len(b))
	if err := w.stream.Send(&pb.SnapshotResponse{Header: w.s.header(0), RemainingBytes: 1, Blob: b, Version: Version}); err != nil {
		return 0, err
	}
	return len(b), nil
}

// finish sends etcd's envelope: the padding and the checksum, with
// RemainingBytes 0.
func (w *snapshotSender) finish() error {
	tail := make([]byte, backup.EtcdPadding(w.n))
	w.sum.Write(tail)
	tail = w.sum.Sum(tail)
	return w.stream.Send(&pb.SnapshotResponse{Header: w.s.header(0), RemainingBytes: 0, Blob: tail, Version: Version})
}
