package client_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
)

// TestGetManyAtomicSnapshot checks GetManyAtomic against a writer that
// sets keys k00..k20 to the round number, all in one transaction per
// round: in every state of the store the keys hold one value, written by
// one entry. A read of the keys that is not one snapshot can see two
// rounds, since it reads them in three batches of READs, one after
// another. Snapshots are taken both ways: one-sided (all keys exist) and
// by RPC (a missing key in the list forces it).
func TestGetManyAtomicSnapshot(t *testing.T) {
	nodes := kvdtest.StartCluster(t, 1, kvdtest.Options{})
	kvdtest.WaitLeader(t, nodes, 10*time.Second)
	c, _ := newCountingClient(t, kvdtest.Endpoints(nodes))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var keys [][]byte
	for i := range 21 {
		keys = append(keys, []byte(fmt.Sprintf("k%02d", i)))
	}
	put := func(round int) error {
		tx := client.Txn{}
		for _, k := range keys {
			tx.Then = append(tx.Then, client.OpPut(k, []byte(strconv.Itoa(round))))
		}
		_, err := c.Txn(ctx, tx)
		return err
	}
	if err := put(0); err != nil {
		t.Fatal(err)
	}
	res, index, err := c.GetManyAtomic(ctx, keys)
	if err != nil || c.Stats().AtomicOneSided != 1 {
		t.Fatalf("quiet snapshot: %v, stats %+v; want it proven one-sided", err, c.Stats())
	}
	checkSnapshot(t, keys, res, index)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	var writeErr error
	go func() {
		defer wg.Done()
		for round := 1; ; round++ {
			select {
			case <-stop:
				return
			default:
			}
			if writeErr = put(round); writeErr != nil {
				return
			}
		}
	}()
	withMissing := append(append([][]byte(nil), keys...), []byte("absent"))
	for i := range 800 {
		ks := keys
		if i%4 == 3 {
			ks = withMissing
		}
		res, index, err := c.GetManyAtomic(ctx, ks)
		if err != nil {
			t.Fatalf("snapshot %d: %v", i, err)
		}
		if len(ks) > len(keys) && res[len(keys)].Found {
			t.Fatalf("snapshot %d: the missing key found: %+v", i, res[len(keys)])
		}
		if !checkSnapshot(t, keys, res[:len(keys)], index) {
			break
		}
	}
	close(stop)
	wg.Wait()
	if writeErr != nil {
		t.Fatal(writeErr)
	}
	st := c.Stats()
	t.Logf("snapshots: %d proven one-sided, %d by RPC", st.AtomicOneSided, st.AtomicRPC)
	if st.AtomicRPC < 200 {
		t.Errorf("%d snapshots by RPC, want at least the 200 with a missing key", st.AtomicRPC)
	}
}

// checkSnapshot reports whether res is a state the writer of
// TestGetManyAtomicSnapshot can leave, at index.
func checkSnapshot(t *testing.T, keys [][]byte, res []client.Result, index uint64) bool {
	t.Helper()
	for i, r := range res {
		if !r.Found || r.ModRevision > index || string(r.Value) != string(res[0].Value) || r.ModRevision != res[0].ModRevision {
			t.Errorf("not one snapshot at index %d: %s=%q (version %d), %s=%q (version %d)",
				index, keys[0], res[0].Value, res[0].ModRevision, keys[i], r.Value, r.ModRevision)
			return false
		}
	}
	return true
}

func TestGetManyAtomicInput(t *testing.T) {
	nodes := kvdtest.StartCluster(t, 1, kvdtest.Options{})
	kvdtest.WaitLeader(t, nodes, 10*time.Second)
	c, _ := newCountingClient(t, kvdtest.Endpoints(nodes))
	ctx := context.Background()
	if _, _, err := c.GetManyAtomic(ctx, [][]byte{[]byte("a"), nil}); !errors.Is(err, client.ErrEmptyKey) {
		t.Errorf("empty key: %v, want ErrEmptyKey", err)
	}
	if _, _, err := c.GetManyAtomic(ctx, make([][]byte, client.MaxGetMany+1)); !errors.Is(err, client.ErrBadRequest) {
		t.Errorf("too many keys: %v, want ErrBadRequest", err)
	}
	big := make([]byte, 1<<20)
	var keys [][]byte
	for i := range 3 {
		k := []byte(fmt.Sprintf("big%d", i))
		keys = append(keys, k)
		if err := c.Put(ctx, k, big); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := c.GetManyAtomic(ctx, append(keys, []byte("absent"))); !errors.Is(err, client.ErrBadRequest) {
		t.Errorf("3 MiB of values by RPC: %v, want ErrBadRequest", err)
	}
	for _, level := range []client.Consistency{client.Serializable, client.ReadIndex, client.Linearizable} {
		res, index, err := c.GetManyAtomic(ctx, keys[:2], client.WithConsistency(level))
		if err != nil || len(res) != 2 || !res[1].Found || len(res[1].Value) != len(big) || index < res[1].ModRevision {
			t.Errorf("%v: 2 MiB: %d results, index %d, %v", level, len(res), index, err)
		}
	}
}
