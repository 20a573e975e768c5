//go:build rdma

package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/backup"
)

// TestRDMALeaseAndBackup: TTL leases and a backup stream through a 3-node
// cluster whose clients and peers talk RDMA (all SEND/RECV messages): a
// lease granted, a key put on it, kept alive, its time to live read, then
// revoked (the key is gone); a second lease's key left to expire (the
// leader deletes it through Raft); a backup streamed in chunks, checked,
// holding every key written.
func TestRDMALeaseAndBackup(t *testing.T) {
	pc := rdmaCluster(t)
	c := rdmaClient(t, pc.Endpoints(), client.Linearizable)
	rdmaLeader(t, c, pc)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	id, err := c.Grant(ctx, 10*time.Second)
	if err != nil {
		t.Fatalf("grant: %v", err)
	}
	if _, err := c.PutRevision(ctx, []byte("leased"), []byte("v"), client.WithLease(id)); err != nil {
		t.Fatalf("put with the lease: %v", err)
	}
	if ttl, err := c.KeepAliveOnce(ctx, id); err != nil || ttl != 10*time.Second {
		t.Fatalf("keepalive: %v, %v", ttl, err)
	}
	if info, err := c.TimeToLive(ctx, id); err != nil || info.Keys != 1 || info.Remaining <= 0 {
		t.Fatalf("time to live: %+v, %v", info, err)
	}
	if err := c.Revoke(ctx, id); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	if _, err := c.Get(ctx, []byte("leased")); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("the revoked lease's key: %v; want ErrNotFound", err)
	}
	if _, err := c.KeepAliveOnce(ctx, id); !errors.Is(err, client.ErrLeaseNotFound) {
		t.Fatalf("keepalive of a revoked lease: %v; want ErrLeaseNotFound", err)
	}

	short, err := c.Grant(ctx, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutRevision(ctx, []byte("expiring"), []byte("v"), client.WithLease(short)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for {
		_, err := c.Get(ctx, []byte("expiring"))
		if errors.Is(err, client.ErrNotFound) {
			break
		}
		if err != nil || time.Since(start) > 30*time.Second {
			t.Fatalf("the expiring key after %v: %v", time.Since(start), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	expiredAfter := time.Since(start)

	const keys = 200
	val := bytes.Repeat([]byte("b"), 512)
	for i := range keys {
		if err := c.Put(ctx, []byte(fmt.Sprintf("backup-%03d", i)), val); err != nil {
			t.Fatal(err)
		}
	}
	var file bytes.Buffer
	info, err := c.Snapshot(ctx, &file)
	if err != nil {
		t.Fatalf("snapshot over RDMA: %v", err)
	}
	h, _, err := backup.Verify(bytes.NewReader(file.Bytes()))
	if err != nil || h.Keys != keys || h.Index != info.Index {
		t.Fatalf("the backup: header %+v, %v; want %d keys at index %d", h, err, keys, info.Index)
	}
	fmt.Printf("RDMAVM-LEASE: grant/put --lease/keepalive/ttl/revoke ok; a 1s lease's key expired after %v; backup of %d keys (%d bytes) at index %d streamed and verified\n",
		expiredAfter.Round(100*time.Millisecond), h.Keys, info.Bytes, info.Index)
}
