package etcdapi_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/errs"
	"github.com/kvd-project/kvd/internal/etcdapi"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
	"github.com/kvd-project/kvd/server"
	"github.com/kvd-project/kvd/transport/tcp"
)

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// memberSummary is a member list as "name peer-url learner" lines, by id.
func memberSummary(ms []*pb.Member) map[uint64]string {
	out := map[uint64]string{}
	for _, m := range ms {
		out[m.ID] = m.Name + " " + m.PeerURLs[0] + " " + strconv.FormatBool(m.IsLearner)
	}
	return out
}

// TestMemberListShowsKvdMembers: each kvd member is listed under its id,
// named by it, with its peer address as its peer URL.
func TestMemberListShowsKvdMembers(t *testing.T) {
	e := start(t, 3, etcdapi.Config{})
	resp, err := e.etcd.MemberList(ctxFor(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint64]string{}
	for _, n := range e.nodes {
		want[n.ID] = strconv.FormatUint(n.ID, 10) + " http://" + n.PeerAddr + " false"
	}
	if got := memberSummary(resp.Members); !maps.Equal(got, want) {
		t.Fatalf("members = %v, want %v", got, want)
	}
}

// TestGatewayListsItself: a gateway's member list is the gateway alone,
// as etcd's grpc-proxy answers, so clients syncing endpoints stay on it.
func TestGatewayListsItself(t *testing.T) {
	urls := []string{"http://127.0.0.1:23790"}
	e := start(t, 1, etcdapi.Config{Gateway: true, Name: "gw1", AdvertiseClientURLs: urls})
	resp, err := e.etcd.MemberList(ctxFor(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Members) != 1 || resp.Members[0].Name != "gw1" || !slices.Equal(resp.Members[0].ClientURLs, urls) || resp.Members[0].ID == 0 {
		t.Fatalf("members = %v, want the gateway alone", resp.Members)
	}
	if _, err := e.etcd.MemberAddAsLearner(ctxFor(t, 10*time.Second), []string{"http://127.0.0.1:1"}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("MemberAdd through a gateway = %v, want Unimplemented", err)
	}
	if _, err := e.etcd.MemberUpdate(ctxFor(t, 10*time.Second), 1, []string{"http://127.0.0.1:1"}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("MemberUpdate through a gateway = %v, want Unimplemented", err)
	}
}

// TestMemberAddPromoteRemove: a member added through etcd's API gets an
// id picked for it, joins as a learner once its node runs under that id,
// is promoted to a voter and removed.
func TestMemberAddPromoteRemove(t *testing.T) {
	e := start(t, 3, etcdapi.Config{})
	ctx := ctxFor(t, 60*time.Second)
	addr := kvdtest.FreeAddrs(t, 1)[0]
	add, err := e.etcd.MemberAddAsLearner(ctx, []string{"http://" + addr})
	if err != nil {
		t.Fatal(err)
	}
	id := add.Member.ID
	if id == 0 || id <= 3 || !add.Member.IsLearner || add.Member.Name != "" || len(add.Members) != 4 {
		t.Fatalf("MemberAdd = %v, want a new, unstarted learner among 4 members", add)
	}
	startJoiner(t, e, id, addr)
	if _, err := e.etcd.MemberPromote(ctx, id); err != nil {
		t.Fatalf("MemberPromote: %v", err)
	}
	list, err := e.etcd.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := memberSummary(list.Members)[id]; got != strconv.FormatUint(id, 10)+" http://"+addr+" false" {
		t.Fatalf("promoted member = %q", got)
	}
	rm, err := e.etcd.MemberRemove(ctx, id)
	if err != nil {
		t.Fatalf("MemberRemove: %v", err)
	}
	if _, ok := memberSummary(rm.Members)[id]; ok || len(rm.Members) != 3 {
		t.Fatalf("after MemberRemove: %v", rm.Members)
	}
}

// TestMemberAddVoter: a member added through etcd's API without
// --learner is a voter at once, as etcd adds it: the cluster keeps
// serving while its node is not running yet and after it joined under
// the id picked for it, and it learns the log. A one-member cluster
// refuses a voter (its leader would lose its quorum until the new node
// ran) with etcd's error for too few started members.
func TestMemberAddVoter(t *testing.T) {
	e := start(t, 3, etcdapi.Config{})
	ctx := ctxFor(t, 60*time.Second)
	put(t, e.etcd, "before", "1")
	addr := kvdtest.FreeAddrs(t, 1)[0]
	add, err := e.etcd.MemberAdd(ctx, []string{"http://" + addr})
	if err != nil {
		t.Fatal(err)
	}
	id := add.Member.ID
	if id == 0 || id <= 3 || add.Member.IsLearner || len(add.Members) != 4 {
		t.Fatalf("MemberAdd = %v, want a new voter among 4 members", add)
	}
	put(t, e.etcd, "added", "2") // three of four voters commit
	startJoiner(t, e, id, addr)
	put(t, e.etcd, "joined", "3")
	var applied uint64
	for _, n := range e.nodes {
		st, err := e.kvd.Status(ctx, n.Addr)
		if err != nil {
			t.Fatal(err)
		}
		applied = max(applied, st.Applied)
	}
	wait.For(t, "the new voter to apply the log", func() bool {
		st, err := e.kvd.Status(ctx, addr)
		return err == nil && !st.IsLearner && st.LeaderID != 0 && st.Applied >= applied
	})
	list, err := e.etcd.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := memberSummary(list.Members)[id]; got != strconv.FormatUint(id, 10)+" http://"+addr+" false" {
		t.Fatalf("new member = %q, want a voter", got)
	}

	one := start(t, 1, etcdapi.Config{})
	if _, err := one.etcd.MemberAdd(ctx, []string{"http://" + kvdtest.FreeAddrs(t, 1)[0]}); !errors.Is(err, rpctypes.ErrMemberNotEnoughStarted) {
		t.Fatalf("MemberAdd of a voter to a one-member cluster = %v, want ErrMemberNotEnoughStarted", err)
	}
	put(t, one.etcd, "still", "serving")
}

// TestMemberUpdateChangesThePeerURL: MemberUpdate gives a member a new
// peer URL, which the member list shows; updating it to its own URL
// again changes nothing.
func TestMemberUpdateChangesThePeerURL(t *testing.T) {
	e := start(t, 3, etcdapi.Config{})
	ctx := ctxFor(t, 30*time.Second)
	addrs := kvdtest.FreeAddrs(t, 2)
	add, err := e.etcd.MemberAddAsLearner(ctx, []string{"http://" + addrs[0]})
	if err != nil {
		t.Fatal(err)
	}
	id := add.Member.ID
	for range 2 {
		up, err := e.etcd.MemberUpdate(ctx, id, []string{"http://" + addrs[1]})
		if err != nil {
			t.Fatal(err)
		}
		if got := memberSummary(up.Members)[id]; got != " http://"+addrs[1]+" true" {
			t.Fatalf("updated member = %q, want the unstarted learner at %s", got, addrs[1])
		}
	}
	list, err := e.etcd.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := memberSummary(list.Members)[id]; got != " http://"+addrs[1]+" true" {
		t.Fatalf("listed member = %q, want it at %s", got, addrs[1])
	}
}

// startJoiner runs node id at addr joining e's cluster.
func startJoiner(t *testing.T, e *env, id uint64, addr string) {
	t.Helper()
	cluster := map[uint64]string{id: addr}
	for _, n := range e.nodes {
		cluster[n.ID] = n.PeerAddr
	}
	tr, err := tcp.New(tcp.Config{Node: addr})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{ID: id, Listen: addr, DataDir: filepath.Join(t.TempDir(), "d"),
		InitialCluster: cluster, Join: true, Transport: tr, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		tr.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close(); tr.Close() })
}

// TestMemberErrorsAreEtcds: refused membership changes fail with the
// errors etcd's clients know.
func TestMemberErrorsAreEtcds(t *testing.T) {
	e := start(t, 3, etcdapi.Config{})
	ctx := ctxFor(t, 30*time.Second)
	for _, tc := range []struct {
		name string
		call func() error
		want error // an rpctypes error, or a status with this code
		code codes.Code
	}{
		{"add a voter at a member's address", func() error {
			_, err := e.etcd.MemberAdd(ctx, []string{"http://" + e.nodes[1].PeerAddr})
			return err
		}, rpctypes.ErrPeerURLExist, 0},
		{"add at two URLs", func() error {
			_, err := e.etcd.MemberAddAsLearner(ctx, []string{"http://127.0.0.1:1", "http://127.0.0.1:2"})
			return err
		}, rpctypes.ErrMemberBadURLs, 0},
		{"add at a unix URL", func() error { _, err := e.etcd.MemberAddAsLearner(ctx, []string{"unix://127.0.0.1:1"}); return err }, rpctypes.ErrMemberBadURLs, 0},
		{"add at a member's address", func() error {
			_, err := e.etcd.MemberAddAsLearner(ctx, []string{"http://" + e.nodes[1].PeerAddr})
			return err
		}, rpctypes.ErrPeerURLExist, 0},
		{"remove a stranger", func() error { _, err := e.etcd.MemberRemove(ctx, 99); return err }, rpctypes.ErrMemberNotFound, 0},
		{"promote a voter", func() error { _, err := e.etcd.MemberPromote(ctx, 2); return err }, rpctypes.ErrMemberNotLearner, 0},
		{"update a stranger", func() error { _, err := e.etcd.MemberUpdate(ctx, 99, []string{"http://127.0.0.1:1"}); return err }, rpctypes.ErrMemberNotFound, 0},
		{"update to a member's address", func() error {
			_, err := e.etcd.MemberUpdate(ctx, 2, []string{"http://" + e.nodes[0].PeerAddr})
			return err
		}, rpctypes.ErrPeerURLExist, 0},
		{"update at two URLs", func() error {
			_, err := e.etcd.MemberUpdate(ctx, 2, []string{"http://127.0.0.1:1", "http://127.0.0.1:2"})
			return err
		}, rpctypes.ErrMemberBadURLs, 0},
	} {
		err := tc.call()
		switch {
		case tc.want != nil && !errors.Is(err, tc.want):
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		case tc.want == nil && status.Code(err) != tc.code:
			t.Errorf("%s: %v, want code %v", tc.name, err, tc.code)
		}
	}
}

// TestMemberKnowsItsClientURLs: on a node (Config.MemberID), the node's
// own member carries the Server's client URLs and Status is the node's.
func TestMemberKnowsItsClientURLs(t *testing.T) {
	urls := []string{"http://127.0.0.1:2379"}
	e := start(t, 3, etcdapi.Config{MemberID: 2, AdvertiseClientURLs: urls})
	ctx := ctxFor(t, 10*time.Second)
	resp, err := e.etcd.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range resp.Members {
		if want := map[bool][]string{true: urls}[m.ID == 2]; !slices.Equal(m.ClientURLs, want) {
			t.Errorf("member %d client URLs %v, want %v", m.ID, m.ClientURLs, want)
		}
	}
	st, err := e.etcd.Status(ctx, e.addr)
	if err != nil || st.Header.MemberId != 2 {
		t.Fatalf("Status = %v, %v; want member 2's", st, err)
	}
}

func TestGatewayWithMemberIDRefused(t *testing.T) {
	_, err := etcdapi.New(etcdapi.Config{Client: &client.Client{}, Gateway: true, MemberID: 1})
	if !errors.Is(err, errs.ErrConfig) {
		t.Fatalf("New(Gateway, MemberID) = %v, want ErrConfig", err)
	}
}
