package etcdapi_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/etcdapi"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
)

// TestStatusReportsTheCluster: Status answers with an etcd version
// clientv3 accepts and the raft state of a member.
func TestStatusReportsTheCluster(t *testing.T) {
	e := start(t, 3, etcdapi.Config{})
	ctx := ctxFor(t, 10*time.Second)
	if err := e.kvd.Put(ctx, []byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	st, err := e.etcd.Status(ctx, e.addr)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case st.Version != etcdapi.Version || st.StorageVersion == "":
		t.Errorf("versions %q %q", st.Version, st.StorageVersion)
	case st.Leader == 0 || st.RaftTerm == 0 || st.Header.RaftTerm != st.RaftTerm:
		t.Errorf("leader %d term %d header term %d", st.Leader, st.RaftTerm, st.Header.RaftTerm)
	case st.RaftAppliedIndex == 0 || st.RaftIndex < st.RaftAppliedIndex:
		t.Errorf("commit %d applied %d", st.RaftIndex, st.RaftAppliedIndex)
	case st.DbSize <= 0 || st.DbSizeInUse != st.DbSize:
		t.Errorf("db size %d in use %d", st.DbSize, st.DbSizeInUse)
	case st.IsLearner || len(st.Errors) != 0:
		t.Errorf("learner %v errors %v", st.IsLearner, st.Errors)
	}
	// clientv3's RejectOldCluster checks that version.
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{e.addr}, DialTimeout: 5 * time.Second,
		RejectOldCluster: true, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("RejectOldCluster client: %v", err)
	}
	c.Close()
}

// TestMoveLeaderMovesIt: MoveLeader hands leadership to the voter named.
func TestMoveLeaderMovesIt(t *testing.T) {
	e := start(t, 3, etcdapi.Config{})
	ctx := ctxFor(t, 30*time.Second)
	st, err := e.etcd.Status(ctx, e.addr)
	if err != nil {
		t.Fatal(err)
	}
	to := st.Leader%3 + 1
	if _, err := e.etcd.MoveLeader(ctx, to); err != nil {
		t.Fatalf("MoveLeader(%d): %v", to, err)
	}
	if st, err = e.etcd.Status(ctx, e.addr); err != nil || st.Leader != to {
		t.Fatalf("after MoveLeader(%d): leader %d, %v", to, st.Leader, err)
	}
	for _, bad := range []uint64{0, 99} {
		if _, err := e.etcd.MoveLeader(ctx, bad); !errors.Is(err, rpctypes.ErrBadLeaderTransferee) {
			t.Errorf("MoveLeader(%d) = %v, want %v", bad, err, rpctypes.ErrBadLeaderTransferee)
		}
	}
}

// TestSnapshotSavedByEtcdRestores: clientv3's snapshot.Save (etcdctl
// snapshot save) accepts the stream, and kvd --restore starts a cluster
// from the file it saved.
func TestSnapshotSavedByEtcdRestores(t *testing.T) {
	e := start(t, 3, etcdapi.Config{})
	ctx := ctxFor(t, 30*time.Second)
	want := map[string]string{}
	for i := range 300 { // several 32 KiB chunks
		k, v := fmt.Sprintf("key%03d", i), string(bytes.Repeat([]byte{byte('a' + i%26)}, 500))
		if err := e.kvd.Put(ctx, []byte(k), []byte(v)); err != nil {
			t.Fatal(err)
		}
		want[k] = v
	}
	path := filepath.Join(t.TempDir(), "snap.db")
	b, version := saveSnapshot(ctx, t, e.etcd)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(b[:len(b)-32]); version != etcdapi.Version || len(b)%512 != 32 || !bytes.Equal(sum[:], b[len(b)-32:]) {
		t.Fatalf("saved %d bytes, version %q: want etcd's framing (size %% 512 == 32, trailing sha256)", len(b), version)
	}
	nodes := kvdtest.StartCluster(t, 1, kvdtest.Options{Restore: path})
	kvdtest.WaitLeader(t, nodes, 10*time.Second)
	kc, err := client.New(client.Config{Endpoints: kvdtest.Endpoints(nodes)})
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	for k, v := range want {
		got, err := kc.Get(ctx, []byte(k))
		if err != nil || string(got) != v {
			t.Fatalf("restored %s = %.10q..., %v", k, got, err)
		}
	}
}

// saveSnapshot is what etcdctl snapshot save (clientv3/snapshot.Save,
// which this module does not build) does with the stream: copy it whole,
// check its size says a checksum ends it.
func saveSnapshot(ctx context.Context, t *testing.T, c *clientv3.Client) ([]byte, string) {
	t.Helper()
	resp, err := c.SnapshotWithVersion(ctx)
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	defer resp.Snapshot.Close()
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, resp.Snapshot); err != nil {
		t.Fatalf("snapshot stream: %v", err)
	}
	return buf.Bytes(), resp.Version
}

// TestAlarmOnFullTable: a member whose table is full shows etcd's NOSPACE
// alarm, which cannot be disarmed while the table stays full and clears
// once keys are deleted.
func TestAlarmOnFullTable(t *testing.T) {
	e := startOpts(t, 1, etcdapi.Config{}, kvdtest.Options{TableMem: 128 << 10, ReuseGrace: 50 * time.Millisecond})
	ctx := ctxFor(t, 60*time.Second)
	if a, err := e.etcd.AlarmList(ctx); err != nil || len(a.Alarms) != 0 {
		t.Fatalf("alarms before = %v, %v", a, err)
	}
	var keys []string
	for i := 0; ; i++ {
		k := fmt.Sprintf("fill%05d", i)
		err := e.kvd.Put(ctx, []byte(k), bytes.Repeat([]byte("x"), 100))
		if errors.Is(err, client.ErrNoSpace) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	a, err := e.etcd.AlarmList(ctx)
	if err != nil || len(a.Alarms) != 1 || a.Alarms[0].Alarm != pb.AlarmType_NOSPACE || a.Alarms[0].MemberID != e.nodes[0].ID {
		t.Fatalf("alarms when full = %v, %v; want NOSPACE of member %d", a, err, e.nodes[0].ID)
	}
	if _, err := e.etcd.AlarmDisarm(ctx, &clientv3.AlarmMember{MemberID: e.nodes[0].ID, Alarm: pb.AlarmType_NOSPACE}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("disarm while full = %v, want FailedPrecondition", err)
	}
	for _, k := range keys[:len(keys)/2] {
		if err := e.kvd.Delete(ctx, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	wait.For(t, "the NOSPACE alarm to clear", func() bool {
		a, err := e.etcd.AlarmList(ctx)
		return err == nil && len(a.Alarms) == 0
	})
	if _, err := e.etcd.AlarmDisarm(ctx, &clientv3.AlarmMember{MemberID: e.nodes[0].ID, Alarm: pb.AlarmType_NOSPACE}); err != nil {
		t.Fatalf("disarm once cleared = %v", err)
	}
}

// TestMaintenanceAnswers: the RPCs kvd answers without work, or refuses.
func TestMaintenanceAnswers(t *testing.T) {
	e := start(t, 1, etcdapi.Config{})
	ctx := ctxFor(t, 10*time.Second)
	if _, err := e.etcd.Defragment(ctx, e.addr); err != nil {
		t.Errorf("Defragment = %v, want success (nothing to do)", err)
	}
	mc := pb.NewMaintenanceClient(e.etcd.ActiveConnection())
	for _, tc := range []struct {
		name string
		call func() error
		code codes.Code
	}{
		{"Hash", func() error { _, err := mc.Hash(ctx, &pb.HashRequest{}); return err }, codes.Unimplemented},
		{"Downgrade", func() error { _, err := mc.Downgrade(ctx, &pb.DowngradeRequest{Version: "3.6.0"}); return err }, codes.Unimplemented},
		{"Alarm ACTIVATE", func() error {
			_, err := mc.Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_ACTIVATE, Alarm: pb.AlarmType_NOSPACE, MemberID: 1})
			return err
		}, codes.Unimplemented},
		{"Alarm bad action", func() error { _, err := mc.Alarm(ctx, &pb.AlarmRequest{Action: 7}); return err }, codes.InvalidArgument},
	} {
		if err := tc.call(); status.Code(err) != tc.code {
			t.Errorf("%s = %v, want %v", tc.name, err, tc.code)
		}
	}
}
