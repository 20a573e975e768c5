package etcdapi

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/url"
	"strconv"
	"strings"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/raft"
)

// clusterService implements etcd's Cluster service on kvd's membership.
// kvd members have no names and one peer address each: a member's name is
// its id in decimal (kvd's --id), its peer URL "http://" + its peer
// address.
type clusterService struct {
	pb.UnimplementedClusterServer
	s *Server
}

// maxAddTries bounds MemberAdd's attempts at a fresh random id: an id
// once removed is refused (raft.ErrMemberRemoved), so another is drawn.
const maxAddTries = 4

func (c *clusterService) MemberList(ctx context.Context, _ *pb.MemberListRequest) (*pb.MemberListResponse, error) {
	ms, err := c.s.members(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.MemberListResponse{Header: c.s.bareHeader(), Members: ms}, nil
}

// members is the member list as etcd shows it: with Config.Gateway, the
// gateway alone (as etcd's grpc-proxy answers), so that clients syncing
// their endpoints stay on it.
func (s *Server) members(ctx context.Context) ([]*pb.Member, error) {
	if s.cfg.Gateway {
		return []*pb.Member{{ID: s.gatewayID(), Name: s.cfg.Name, ClientURLs: s.cfg.AdvertiseClientURLs}}, nil
	}
	ms, err := s.c.Members(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*pb.Member, 0, len(ms))
	for _, m := range ms {
		out = append(out, s.member(m))
	}
	return out, nil
}

// member is kvd member m as etcd's. Only the member this Server runs on
// (Config.MemberID) knows its etcd client URLs (Config.AdvertiseClientURLs); kvd's
// membership does not carry the others', so theirs are empty.
func (s *Server) member(m client.Member) *pb.Member {
	pm := &pb.Member{ID: m.ID, PeerURLs: []string{"http://" + m.Addr}, IsLearner: m.IsLearner}
	if !m.IsLearner || m.ClientAddr != "" {
		// etcd's member without a name is one that never started
		// (etcdctl: "unstarted"); kvd's nearest is a learner whose node
		// has not connected to the leader, as after MemberAdd.
		pm.Name = strconv.FormatUint(m.ID, 10)
	}
	if s.cfg.MemberID != 0 && s.cfg.MemberID == m.ID {
		pm.ClientURLs = s.cfg.AdvertiseClientURLs
	}
	return pm
}

// gatewayID is the member id a gateway reports for itself: a fixed
// number derived from its name, so that it is stable across restarts.
func (s *Server) gatewayID() uint64 {
	var h uint64 = 14695981039346656037 // FNV-1a
	for i := 0; i < len(s.cfg.Name); i++ {
		h = (h ^ uint64(s.cfg.Name[i])) * 1099511628211
	}
	return max(h, 1)
}

func (c *clusterService) MemberAdd(ctx context.Context, r *pb.MemberAddRequest) (*pb.MemberAddResponse, error) {
	if c.s.cfg.Gateway {
		return nil, notSupported("MemberAdd", "a gateway has no membership of its own; add members through a kvd node")
	}
	addr, err := peerAddr(r.PeerURLs)
	if err != nil {
		return nil, err
	}
	// A voter counts towards every quorum at once (etcd's
	// ConfChangeAddNode): the leader refuses it, as etcd's strict
	// reconfiguration check does, unless the voters it heard from lately
	// are a quorum with it (raft.Node.AddVoter).
	add := c.s.c.AddVoter
	if r.IsLearner {
		add = c.s.c.AddMember
	}
	ms, err := c.s.c.Members(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	for try := 0; ; try++ {
		id := newMemberID(ms)
		err = add(ctx, id, addr)
		if err != nil && try < maxAddTries && isRaftErr(err, raft.ErrMemberRemoved) {
			continue
		}
		if err != nil {
			return nil, toStatus(err)
		}
		if ms, err = c.s.c.Members(ctx); err != nil {
			return nil, toStatus(err)
		}
		resp := &pb.MemberAddResponse{Header: c.s.bareHeader()}
		for _, m := range ms {
			pm := c.s.member(m)
			resp.Members = append(resp.Members, pm)
			if m.ID == id {
				resp.Member = pm
			}
		}
		return resp, nil
	}
}

// newMemberID picks a random id no member has, as etcd picks a new
// member's id (kvd's own nodes are numbered by the operator instead).
func newMemberID(ms []client.Member) uint64 {
	for {
		id := rand.Uint64N(1<<53) + 1 // exact in JSON numbers too
		used := false
		for _, m := range ms {
			used = used || m.ID == id
		}
		if !used {
			return id
		}
	}
}

// peerAddr is the kvd peer address of an etcd member's peer URLs: kvd
// members have exactly one, host:port (the scheme says nothing to kvd,
// whose peers speak its own protocol; TLS is the node's flags').
func peerAddr(urls []string) (string, error) {
	if len(urls) != 1 {
		return "", rpctypes.ErrGRPCMemberBadURLs // a kvd member has exactly one
	}
	u, err := url.Parse(urls[0])
	if err != nil || u.Host == "" || u.Port() == "" || (u.Scheme != "http" && u.Scheme != "https") ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
		return "", rpctypes.ErrGRPCMemberBadURLs
	}
	return u.Host, nil
}

func (c *clusterService) MemberRemove(ctx context.Context, r *pb.MemberRemoveRequest) (*pb.MemberRemoveResponse, error) {
	if c.s.cfg.Gateway {
		return nil, notSupported("MemberRemove", "a gateway has no membership of its own; remove members through a kvd node")
	}
	if err := c.s.c.RemoveMember(ctx, r.ID); err != nil {
		return nil, toStatus(err)
	}
	ms, err := c.s.members(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.MemberRemoveResponse{Header: c.s.bareHeader(), Members: ms}, nil
}

// MemberUpdate changes a member's peer address (raft's
// ConfChangeUpdateNode carrying it), as etcd's.
func (c *clusterService) MemberUpdate(ctx context.Context, r *pb.MemberUpdateRequest) (*pb.MemberUpdateResponse, error) {
	if c.s.cfg.Gateway {
		return nil, notSupported("MemberUpdate", "a gateway has no membership of its own; update members through a kvd node")
	}
	addr, err := peerAddr(r.PeerURLs)
	if err != nil {
		return nil, err
	}
	if err := c.s.c.UpdateMember(ctx, r.ID, addr); err != nil {
		return nil, toStatus(err)
	}
	ms, err := c.s.members(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.MemberUpdateResponse{Header: c.s.bareHeader(), Members: ms}, nil
}

func (c *clusterService) MemberPromote(ctx context.Context, r *pb.MemberPromoteRequest) (*pb.MemberPromoteResponse, error) {
	if c.s.cfg.Gateway {
		return nil, notSupported("MemberPromote", "a gateway has no membership of its own; promote members through a kvd node")
	}
	if err := c.s.c.PromoteMember(ctx, r.ID); err != nil {
		return nil, toStatus(err)
	}
	ms, err := c.s.members(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.MemberPromoteResponse{Header: c.s.bareHeader(), Members: ms}, nil
}

// isRaftErr reports whether err, as it came back through kvd's client
// (a bad request carrying raft's words), is raft's sentinel want.
func isRaftErr(err, want error) bool {
	return errors.Is(err, client.ErrBadRequest) && strings.Contains(err.Error(), want.Error())
}
