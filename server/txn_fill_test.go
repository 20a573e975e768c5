package server_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
)

// TestTxnAdmissionNeverOverfills: transactions are admitted like PUTs,
// with room reserved for every PUT of either branch, so concurrent
// transactions filling the table are refused with ErrNoSpace (applying
// nothing) before the leader's region has to refuse an applied write; and
// every reservation ends with its transaction.
func TestTxnAdmissionNeverOverfills(t *testing.T) {
	nodes := kvdtest.StartCluster(t, 1, kvdtest.Options{TableMem: fillTableMem, ReuseGrace: fillGrace})
	lead := kvdtest.WaitLeader(t, nodes, 15*time.Second)
	c, err := client.New(client.Config{Endpoints: kvdtest.Endpoints(nodes), AttemptTimeout: 10 * time.Second, RequestTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	m := &fillModel{m: map[string][]byte{}}
	const workers = 8
	var refused atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 5))
			for i, fails := 0, 0; fails < 3; i++ {
				k1, k2 := fmt.Sprintf("t%d-%d-a", w, i), fmt.Sprintf("t%d-%d-b", w, i)
				v1 := bytes.Repeat([]byte{'a'}, mediumValue(r))
				v2 := bytes.Repeat([]byte{'b'}, smallValue(r))
				_, err := c.Txn(context.Background(), client.Txn{
					If:   []client.Cmp{client.KeyMissing([]byte(k1))},
					Then: []client.Op{client.OpPut([]byte(k1), v1), client.OpPut([]byte(k2), v2)},
					Else: []client.Op{client.OpPut([]byte(k2), v1)},
				})
				switch {
				case errors.Is(err, client.ErrNoSpace):
					fails++
					refused.Add(1)
					time.Sleep(fillGrace * 3 / 2)
				case err != nil:
					t.Errorf("txn %s: %v", k1, err)
					return
				default:
					fails = 0
					m.set(k1, v1)
					m.set(k2, v2)
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	st := lead.Srv.TableStats()
	t.Logf("%d keys written by transactions, %d transactions refused", len(m.keys()), refused.Load())
	if refused.Load() == 0 || st.Refusals == 0 {
		t.Fatal("no transaction was refused: the table never filled")
	}
	if st.BytesReserved != 0 || st.SlotsHeld != 0 {
		t.Fatalf("reservations left after every transaction returned: %+v", st)
	}
	checkNoApplyMisses(t, nodes, lead)
	checkNodes(t, nodes, m)
}
