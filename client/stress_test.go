package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
)

// churnValue is self-describing: its key, its sequence number, and a filler
// whose length and byte both follow from the sequence number, so a reader
// can tell a whole value from a torn, mixed or foreign one.
func churnValue(key string, seq int) []byte {
	n := (seq * 211) % 3000
	fill := byte('a' + seq%26)
	v := fmt.Appendf(nil, "%s|%d|", key, seq)
	return append(v, bytes.Repeat([]byte{fill}, n)...)
}

func parseChurnValue(key string, v []byte) (int, error) {
	rest, ok := bytes.CutPrefix(v, []byte(key+"|"))
	if !ok {
		return 0, fmt.Errorf("value of %s does not start with its key: %.40q", key, v)
	}
	num, _, ok := bytes.Cut(rest, []byte("|"))
	if !ok {
		return 0, fmt.Errorf("value of %s has no sequence: %.40q", key, v)
	}
	seq, err := strconv.Atoi(string(num))
	if err != nil {
		return 0, fmt.Errorf("value of %s has a bad sequence: %.40q", key, v)
	}
	want := churnValue(key, seq)
	if !bytes.Equal(v, want) {
		return 0, fmt.Errorf("value of %s seq %d is torn or mixed (%d bytes, want %d)", key, seq, len(v), len(want))
	}
	return seq, nil
}

// TestChurnNeverTorn: writers rewrite keys with values that change size
// while readers GET them one-sided through the real TCP transport. The table
// is small and the reuse grace short, so record memory is recycled under the
// readers' feet. A reader must never accept a torn, mixed or dead value, and
// (one writer per key, linearizable reads) never see a key go backwards.
func TestChurnNeverTorn(t *testing.T) {
	nodes := kvdtest.StartCluster(t, 1, kvdtest.Options{TableMem: 2 << 20, ReuseGrace: 40 * time.Millisecond})
	kvdtest.WaitLeader(t, nodes, 10*time.Second)
	eps := kvdtest.Endpoints(nodes)

	const writers, readers, keysPerWriter, putsPerWriter = 3, 6, 8, 400
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// (Writes get 10 s attempts: at the default 1 s a busy machine turns a
	// slow PUT into "maybe applied", which is not what this test is about.)
	wc, err := client.New(client.Config{Endpoints: eps, AttemptTimeout: 10 * time.Second, RequestTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer wc.Close()
	var wg sync.WaitGroup
	var done atomic.Bool
	errs := make(chan error, writers+readers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 1; i <= putsPerWriter; i++ {
				key := fmt.Sprintf("w%d-k%d", w, i%keysPerWriter)
				if err := wc.Put(ctx, []byte(key), churnValue(key, i)); err != nil {
					errs <- fmt.Errorf("put %s: %w", key, err)
					return
				}
			}
		}()
	}
	var gets, found atomic.Int64
	var rwg sync.WaitGroup
	var stats []client.Stats
	var statsMu sync.Mutex
	for r := 0; r < readers; r++ {
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			rc, err := client.New(client.Config{Endpoints: eps})
			if err != nil {
				errs <- err
				return
			}
			defer rc.Close()
			last := map[string]int{}
			rng := rand.New(rand.NewPCG(uint64(r), 7))
			for !done.Load() {
				key := fmt.Sprintf("w%d-k%d", rng.IntN(writers), rng.IntN(keysPerWriter))
				v, err := rc.Get(ctx, []byte(key))
				gets.Add(1)
				if errors.Is(err, client.ErrNotFound) {
					if last[key] > 0 {
						errs <- fmt.Errorf("%s vanished after seq %d", key, last[key])
						return
					}
					continue
				}
				if err != nil {
					errs <- fmt.Errorf("get %s: %w", key, err)
					return
				}
				found.Add(1)
				seq, err := parseChurnValue(key, v)
				if err != nil {
					errs <- err
					return
				}
				if seq < last[key] {
					errs <- fmt.Errorf("%s went back from seq %d to %d", key, last[key], seq)
					return
				}
				last[key] = seq
			}
			statsMu.Lock()
			stats = append(stats, rc.Stats())
			statsMu.Unlock()
		}()
	}
	wg.Wait()
	done.Store(true)
	rwg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	retries := map[string]uint64{}
	var rpc uint64
	for _, s := range stats {
		rpc += s.RPCGets
		for k, v := range s.Retries {
			retries[k] += v
		}
	}
	t.Logf("%d puts, %d gets (%d found), %d answered by RPC fallback, retries by reason %v",
		writers*putsPerWriter, gets.Load(), found.Load(), rpc, retries)
	if found.Load() == 0 {
		t.Fatal("readers never found a value: the test checked nothing")
	}
}
