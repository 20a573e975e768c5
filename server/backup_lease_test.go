package server_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
)

// TestBackupCarriesLeases: a backup carries the TTL leases and which keys
// are attached to them, and a restore brings them back attached: the
// leases are listed with their full TTL and key counts, the keys of a
// short lease that nothing keeps alive expire, and the keys of a long
// lease and keys without one stay.
func TestBackupCarriesLeases(t *testing.T) {
	skipShort(t)
	old := kvdtest.StartCluster(t, 1, kvdtest.Options{})
	kvdtest.WaitLeader(t, old, 10*time.Second)
	c := newClient(t, kvdtest.Endpoints(old), client.Linearizable)
	ctx := context.Background()
	short, err := c.Grant(ctx, client.MinLeaseTTL)
	if err != nil {
		t.Fatal(err)
	}
	// Kept alive until the backup is saved: the restored copy is what
	// must expire.
	kctx, stopKeeping := context.WithCancel(ctx)
	defer stopKeeping()
	if _, err := c.KeepAlive(kctx, short); err != nil {
		t.Fatal(err)
	}
	long, err := c.Grant(ctx, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	puts := []struct {
		key   string
		lease client.LeaseID
	}{{"plain", 0}, {"svc/a", short}, {"svc/b", short}, {"svc/c", long}}
	for _, p := range puts {
		var opts []client.WriteOption
		if p.lease != 0 {
			opts = append(opts, client.WithLease(p.lease))
		}
		if _, err := c.PutRevision(ctx, []byte(p.key), []byte("v-"+p.key), opts...); err != nil {
			t.Fatalf("put %s: %v", p.key, err)
		}
	}
	path, info := saveBackup(t, c, t.TempDir())
	stopKeeping()
	if info.Leases != 2 || info.Keys != 4 {
		t.Fatalf("backup info %+v, want 4 keys and 2 leases", info)
	}

	restored := kvdtest.StartCluster(t, 1, kvdtest.Options{Restore: path, Token: "restored"})
	kvdtest.WaitLeader(t, restored, 10*time.Second)
	rc := newClient(t, kvdtest.Endpoints(restored), client.Linearizable)
	ids, err := rc.Leases(ctx)
	if err != nil || !slices.Equal(ids, []client.LeaseID{short, long}) && !slices.Equal(ids, []client.LeaseID{long, short}) {
		t.Fatalf("restored leases %v, %v; want %v and %v", ids, err, short, long)
	}
	li, err := rc.TimeToLive(ctx, long)
	if err != nil || li.TTL != time.Hour || li.Keys != 1 || li.Remaining < 30*time.Minute {
		t.Fatalf("restored long lease %+v, %v; want TTL 1h restarted in full, 1 key", li, err)
	}
	if li, err := rc.TimeToLive(ctx, short); err == nil && (li.TTL != client.MinLeaseTTL || li.Keys != 2) {
		t.Fatalf("restored short lease %+v; want TTL %v, 2 keys", li, client.MinLeaseTTL)
	}

	gone := func(key string) bool {
		_, err := rc.Get(ctx, []byte(key))
		return errors.Is(err, client.ErrNotFound)
	}
	wait.For(t, "the short lease's restored keys to expire", func() bool { return gone("svc/a") && gone("svc/b") })
	if _, err := rc.TimeToLive(ctx, short); !errors.Is(err, client.ErrLeaseNotFound) {
		t.Fatalf("expired lease: TimeToLive = %v, want ErrLeaseNotFound", err)
	}
	for _, k := range []string{"plain", "svc/c"} {
		if v, err := rc.Get(ctx, []byte(k)); err != nil || string(v) != "v-"+k {
			t.Fatalf("%s after the short lease expired: %q, %v", k, v, err)
		}
	}
	if li, err := rc.TimeToLive(ctx, long); err != nil || li.Keys != 1 {
		t.Fatalf("long lease after the short one expired: %+v, %v", li, err)
	}
}

// TestRestoreFormatWithoutLeases: a backup written before backups carried
// leases restores, its keys with their values and versions.
func TestRestoreFormatWithoutLeases(t *testing.T) {
	skipShort(t)
	restored := kvdtest.StartCluster(t, 1, kvdtest.Options{Restore: "../internal/backup/testdata/format1.kvdsnap", Token: "restored"})
	kvdtest.WaitLeader(t, restored, 10*time.Second)
	rc := newClient(t, kvdtest.Endpoints(restored), client.Linearizable)
	checkRestored(t, rc, map[string]kv{"a": {"1", 3}, "b": {"", 4}, "svc/x": {"addr", 7}})
	if ids, err := rc.Leases(context.Background()); err != nil || len(ids) != 0 {
		t.Fatalf("leases after restoring a backup without any: %v, %v", ids, err)
	}
}

// TestRestoreFormatWithoutRevisions: the way from a data directory of the
// previous build is a backup it saved (testdata/format2.kvdsnap: versions,
// a TTL lease, no revisions) restored by this one: its keys come back with
// their values and versions, the leased one attached to its lease at its
// full TTL.
func TestRestoreFormatWithoutRevisions(t *testing.T) {
	skipShort(t)
	restored := kvdtest.StartCluster(t, 1, kvdtest.Options{Restore: "../internal/backup/testdata/format2.kvdsnap", Token: "restored"})
	kvdtest.WaitLeader(t, restored, 10*time.Second)
	rc := newClient(t, kvdtest.Endpoints(restored), client.Linearizable)
	checkRestored(t, rc, map[string]kv{"alpha": {"one", 3}, "beta": {"two-again", 5}, "svc/node1": {"10.0.0.1", 7}})
	const lease client.LeaseID = 8080258718234143399
	if li, err := rc.TimeToLive(context.Background(), lease); err != nil || li.Keys != 1 || li.TTL != time.Hour {
		t.Fatalf("lease %d after the restore: %+v, %v; want 1 key, granted 1h", lease, li, err)
	}
}
