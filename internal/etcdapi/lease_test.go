package etcdapi_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/etcdapi"
)

func TestLeaseGrantKeepAliveAndTimeToLiveWithKeys(t *testing.T) {
	e := start(t, 1, etcdapi.Config{})
	ctx := t.Context()
	g, err := e.etcd.Grant(ctx, 20)
	if err != nil {
		t.Fatal(err)
	}
	if g.ID == 0 || g.TTL != 20 {
		t.Fatalf("grant: id %d ttl %d, want an id and ttl 20", g.ID, g.TTL)
	}
	e.put(t, "l/a", "1", client.WithLease(client.LeaseID(g.ID)))
	e.put(t, "l/b", "1", client.WithLease(client.LeaseID(g.ID)))
	e.put(t, "l/c", "1") // no lease
	other, err := e.etcd.Grant(ctx, 20)
	if err != nil {
		t.Fatal(err)
	}
	e.put(t, "l/d", "1", client.WithLease(client.LeaseID(other.ID)))
	ka, err := e.etcd.KeepAliveOnce(ctx, g.ID)
	if err != nil || ka.TTL != 20 || ka.ID != g.ID {
		t.Fatalf("keepalive once: %+v %v, want ttl 20", ka, err)
	}
	kc, err := e.etcd.KeepAlive(ctx, g.ID)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-kc:
		if r == nil || r.TTL != 20 {
			t.Fatalf("keepalive channel: %+v, want ttl 20", r)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no keepalive response")
	}
	ttl, err := e.etcd.TimeToLive(ctx, g.ID, clientv3.WithAttachedKeys())
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{}
	for _, k := range ttl.Keys {
		keys = append(keys, string(k))
	}
	slices.Sort(keys)
	if ttl.GrantedTTL != 20 || ttl.TTL <= 0 || ttl.TTL > 20 || !slices.Equal(keys, []string{"l/a", "l/b"}) {
		t.Errorf("time to live: granted %d ttl %d keys %q, want 20, (0, 20], [l/a l/b]", ttl.GrantedTTL, ttl.TTL, keys)
	}
	if ttl, err := e.etcd.TimeToLive(ctx, g.ID); err != nil || len(ttl.Keys) != 0 {
		t.Errorf("time to live without keys: %+v %v", ttl, err)
	}
}

// TestLeaseKeepAliveHeaderIsTheStoreRevision: a keep-alive's header
// revision is the store's when the leader renewed the lease, as etcd's,
// not the last one a lease call of this front read: writes made since
// the grant (none of them through a lease call) show in it. A lease gone
// is still etcd's ErrLeaseNotFound.
func TestLeaseKeepAliveHeaderIsTheStoreRevision(t *testing.T) {
	e := start(t, 1, etcdapi.Config{})
	ctx := t.Context()
	g, err := e.etcd.Grant(ctx, 20)
	if err != nil {
		t.Fatal(err)
	}
	e.put(t, "kah/a", "1")
	now := e.put(t, "kah/b", "1")
	ka, err := e.etcd.KeepAliveOnce(ctx, g.ID)
	if err != nil {
		t.Fatal(err)
	}
	if ka.Revision != now || ka.Revision <= g.Revision {
		t.Errorf("keep-alive header revision %d, want the store's %d (the grant's was %d)", ka.Revision, now, g.Revision)
	}
	if _, err := e.etcd.Revoke(ctx, g.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.etcd.KeepAliveOnce(ctx, g.ID); !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		t.Errorf("keep-alive of a revoked lease: %v, want %v", err, rpctypes.ErrLeaseNotFound)
	}
}

func TestLeaseGrantTTLRulesAsEtcd(t *testing.T) {
	e := start(t, 1, etcdapi.Config{})
	minTTL := int64(client.MinLeaseTTL / time.Second)
	for _, tc := range []struct {
		name    string
		ttl     int64
		wantTTL int64
		wantErr error
	}{
		{"zero raised to the minimum", 0, minTTL, nil},
		{"negative raised to the minimum", -5, minTTL, nil},
		{"ordinary", 60, 60, nil},
		{"kvd's maximum", int64(client.MaxLeaseTTL / time.Second), int64(client.MaxLeaseTTL / time.Second), nil},
		{"past kvd's maximum", int64(client.MaxLeaseTTL/time.Second) + 1, 0, rpctypes.ErrLeaseTTLTooLarge},
		{"past etcd's maximum", 9_000_000_001, 0, rpctypes.ErrLeaseTTLTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := e.etcd.Grant(t.Context(), tc.ttl)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("grant ttl %d: %v, want %v", tc.ttl, err, tc.wantErr)
			}
			if err == nil && g.TTL != tc.wantTTL {
				t.Errorf("grant ttl %d got ttl %d, want %d", tc.ttl, g.TTL, tc.wantTTL)
			}
		})
	}
}

// TestLeaseGrantWithChosenIDAsEtcd: a grant naming its ID creates the
// lease with that ID (keys attach to it, clientv3 sees it), and a second
// grant of the ID gets etcd's "lease already exists", as etcd's lessor
// answers; ID 0 still gets one the server picks. Against a real etcd too.
func TestLeaseGrantWithChosenIDAsEtcd(t *testing.T) { againstKvdAndEtcd(t, leaseGrantWithChosenID) }

func leaseGrantWithChosenID(t *testing.T, c *clientv3.Client) {
	ctx := t.Context()
	lc := pb.NewLeaseClient(c.ActiveConnection())
	const chosen = 12345
	tests := []struct {
		name    string
		id, ttl int64
		wantErr error // nil: granted with ID id (any if 0)
	}{
		{"chosen id", chosen, 10, nil},
		{"same id again", chosen, 20, rpctypes.ErrGRPCLeaseExist},
		{"server picks", 0, 10, nil},
		{"another chosen id", chosen + 1, 10, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := lc.LeaseGrant(ctx, &pb.LeaseGrantRequest{TTL: tc.ttl, ID: tc.id})
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || rpctypes.Error(err) != rpctypes.ErrLeaseExist {
					t.Fatalf("grant of id %d: %v, want %v", tc.id, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.id != 0 && r.ID != tc.id || r.ID == 0 || r.TTL != tc.ttl {
				t.Fatalf("grant of id %d ttl %d: got id %d ttl %d", tc.id, tc.ttl, r.ID, r.TTL)
			}
		})
	}
	// The first grant stands: its TTL, and keys attach to its ID.
	if ttl, err := c.TimeToLive(ctx, chosen); err != nil || ttl.GrantedTTL != 10 {
		t.Fatalf("time to live of the chosen id: %+v, %v; want granted TTL 10 (the refused grant changed nothing)", ttl, err)
	}
	if _, err := c.Put(ctx, "chosen/k", "v", clientv3.WithLease(chosen)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Revoke(ctx, chosen); err != nil {
		t.Fatal(err)
	}
	if r, err := c.Get(ctx, "chosen/k"); err != nil || len(r.Kvs) != 0 {
		t.Fatalf("key of the revoked chosen lease: %v, %v; want it deleted", r, err)
	}
}

func TestLeaseUnknownAsEtcd(t *testing.T) {
	e := start(t, 1, etcdapi.Config{})
	ctx := t.Context()
	const unknown = 424242
	if _, err := e.etcd.Revoke(ctx, unknown); !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		t.Errorf("revoke unknown: %v, want ErrLeaseNotFound", err)
	}
	if _, err := e.etcd.KeepAliveOnce(ctx, unknown); !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		t.Errorf("keepalive unknown: %v, want ErrLeaseNotFound (a response with TTL 0)", err)
	}
	if r, err := e.etcd.TimeToLive(ctx, unknown); err != nil || r.TTL != -1 {
		t.Errorf("time to live unknown: %+v %v, want TTL -1", r, err)
	}
}

func TestLeaseLeasesListsGrantedAndNotRevoked(t *testing.T) {
	e := start(t, 1, etcdapi.Config{})
	ctx := t.Context()
	var ids []int64
	for range 3 {
		g, err := e.etcd.Grant(ctx, 30)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, int64(g.ID))
	}
	if _, err := e.etcd.Revoke(ctx, clientv3.LeaseID(ids[1])); err != nil {
		t.Fatal(err)
	}
	r, err := e.etcd.Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for _, l := range r.Leases {
		got = append(got, int64(l.ID))
	}
	slices.Sort(got)
	want := []int64{ids[0], ids[2]}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("leases %v, want %v", got, want)
	}
}

func TestLeaseExpiryDeletesItsKeys(t *testing.T) {
	e := start(t, 1, etcdapi.Config{})
	ctx := t.Context()
	g, err := e.etcd.Grant(ctx, 1) // the minimum; never kept alive
	if err != nil {
		t.Fatal(err)
	}
	wc := e.etcd.Watch(ctx, "exp")
	e.put(t, "exp", "v", client.WithLease(client.LeaseID(g.ID)))
	evs := collectEvents(t, wc, 2)
	if evs[0].Type != mvccpb.PUT || evs[1].Type != mvccpb.DELETE {
		t.Errorf("events %q, want the put then the expiry's delete", eventKeys(evs))
	}
	if r, err := e.etcd.TimeToLive(ctx, g.ID); err != nil || r.TTL != -1 {
		t.Errorf("expired lease: %+v %v, want TTL -1", r, err)
	}
}
