package etcdapi_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/etcdapi"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
)

// TestHashKVEqualOnEveryMember: every member hashes its own state alike
// at the same revision, the hash changes with the state, and etcd's
// HashKV reports it with the compaction revision.
func TestHashKVEqualOnEveryMember(t *testing.T) {
	e := start(t, 3, etcdapi.Config{MemberID: 3})
	ctx := ctxFor(t, 30*time.Second)
	var rev uint64
	for i := range 20 {
		r, err := e.kvd.PutRevision(ctx, fmt.Appendf(nil, "k%02d", i), fmt.Appendf(nil, "v%d", i))
		if err != nil {
			t.Fatal(err)
		}
		rev = r
	}
	if err := e.kvd.Delete(ctx, []byte("k03")); err != nil {
		t.Fatal(err)
	}
	hashes := map[uint64]client.HashKV{}
	for _, n := range e.nodes {
		wait.NoError(t, fmt.Sprintf("member %d's hash at %d", n.ID, rev), func() error {
			h, err := e.kvd.HashKV(ctx, n.Addr, rev)
			hashes[n.ID] = h
			return err
		})
	}
	want := client.HashKV{Hash: hashes[1].Hash, HashRevision: rev}
	for id, h := range hashes {
		if h != want {
			t.Errorf("member %d: %+v, want %+v", id, h, want)
		}
	}
	latest, err := e.kvd.HashKV(ctx, e.nodes[0].Addr, 0)
	if err != nil || latest.Hash == want.Hash || latest.HashRevision != rev+1 {
		t.Errorf("latest hash %+v, %v: want another hash at %d", latest, err, rev+1)
	}
	if err := e.kvd.Compact(ctx, rev-5); err != nil {
		t.Fatal(err)
	}
	wait.NoError(t, "member 3's hash through etcd's API", func() error {
		resp, err := e.etcd.HashKV(ctx, e.addr, int64(rev))
		switch {
		case err != nil:
			return err
		case resp.Hash != want.Hash || resp.HashRevision != int64(rev) || resp.CompactRevision != int64(rev-5) || resp.Header.MemberId != 3:
			return fmt.Errorf("HashKV = %+v, want hash %x at %d, compacted at %d, from member 3", resp, want.Hash, rev, rev-5)
		}
		return nil
	})
	for _, tc := range []struct {
		rev  int64
		want error
		code codes.Code
	}{
		{int64(rev - 6), rpctypes.ErrCompacted, 0},
		{int64(rev + 100), rpctypes.ErrFutureRev, 0},
		{-1, nil, codes.InvalidArgument},
	} {
		_, err := e.etcd.HashKV(ctx, e.addr, tc.rev)
		switch {
		case tc.want != nil && !errors.Is(err, tc.want):
			t.Errorf("HashKV(%d) = %v, want %v", tc.rev, err, tc.want)
		case tc.want == nil && status.Code(err) != tc.code:
			t.Errorf("HashKV(%d) = %v, want %v", tc.rev, err, tc.code)
		}
	}
}
