package etcdapi_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/kvd-project/kvd/internal/etcdapi"
)

// stmAccounts, stmWorkers and stmTransfers size the bank: each worker
// makes stmTransfers transfers between random accounts, all at once.
const (
	stmAccounts  = 4
	stmWorkers   = 3
	stmTransfers = 10
	stmBalance   = 100 // each account's opening balance
)

// stmTimeout bounds one bank run: audits and transfers retry on every
// conflict, many times over under the race detector.
const stmTimeout = 3 * time.Minute

func stmAccount(i int) string { return fmt.Sprintf("/bank/acct%d", i) }

// TestSTMTransfersConserveTheTotal runs clientv3's software transactional
// memory (concurrency.NewSTM), unmodified, over a 3-node cluster: workers
// move random amounts between accounts, each transfer refused (no write)
// if it would overdraw; auditors read every account in one STM. For each
// isolation level the issue names: the total is conserved and no account
// is negative at the end, and every committed audit saw the opening total
// (an STM that commits reads one consistent state).
func TestSTMTransfersConserveTheTotal(t *testing.T) {
	for _, iso := range []struct {
		name string
		lvl  concurrency.Isolation
	}{
		{"serializable-snapshot", concurrency.SerializableSnapshot},
		{"serializable", concurrency.Serializable},
		{"repeatable-reads", concurrency.RepeatableReads},
	} {
		t.Run(iso.name, func(t *testing.T) {
			e := start(t, 3, etcdapi.Config{})
			ctx, cancel := context.WithTimeout(t.Context(), stmTimeout)
			defer cancel()
			for i := range stmAccounts {
				put(t, e.etcd, stmAccount(i), strconv.Itoa(stmBalance))
			}
			opts := []concurrency.STMOption{concurrency.WithIsolation(iso.lvl), concurrency.WithAbortContext(ctx)}
			var wg sync.WaitGroup
			errc := make(chan error, 2*stmWorkers)
			for w := range stmWorkers {
				wg.Add(2)
				go func() {
					defer wg.Done()
					errc <- stmTransfer(e, opts, w)
				}()
				go func() {
					defer wg.Done()
					errc <- stmAudit(e, opts)
				}()
			}
			wg.Wait()
			close(errc)
			for err := range errc {
				if err != nil {
					t.Error(err)
				}
			}
			total := 0
			for i := range stmAccounts {
				r, err := e.etcd.Get(ctx, stmAccount(i))
				if err != nil || len(r.Kvs) != 1 {
					t.Fatalf("account %d: %v, %v", i, r, err)
				}
				n, _ := strconv.Atoi(string(r.Kvs[0].Value))
				if n < 0 {
					t.Errorf("account %d overdrawn: %d", i, n)
				}
				total += n
			}
			if total != stmAccounts*stmBalance {
				t.Errorf("total after the transfers: %d, want %d", total, stmAccounts*stmBalance)
			}
		})
	}
}

// stmTransfer makes stmTransfers transfers for worker w.
func stmTransfer(e *env, opts []concurrency.STMOption, w int) error {
	rng := rand.New(rand.NewPCG(uint64(w), 29))
	for range stmTransfers {
		from, to := rng.IntN(stmAccounts), rng.IntN(stmAccounts-1)
		if to >= from {
			to++
		}
		amount := 1 + rng.IntN(stmBalance/2)
		err := retryTimedOut(func() error {
			_, err := concurrency.NewSTM(e.etcd, func(s concurrency.STM) error {
				a, err := strconv.Atoi(s.Get(stmAccount(from)))
				if err != nil {
					return err
				}
				b, err := strconv.Atoi(s.Get(stmAccount(to)))
				if err != nil {
					return err
				}
				if a < amount {
					return nil // refused: no write
				}
				s.Put(stmAccount(from), strconv.Itoa(a-amount))
				s.Put(stmAccount(to), strconv.Itoa(b+amount))
				return nil
			}, opts...)
			return err
		})
		if err != nil {
			return fmt.Errorf("transfer of %d from %d to %d: %w", amount, from, to, err)
		}
	}
	return nil
}

// stmAudit reads every account in one STM, stmTransfers times, and checks
// the total each committed audit saw.
func stmAudit(e *env, opts []concurrency.STMOption) error {
	for range stmTransfers {
		var total int
		err := retryTimedOut(func() error {
			_, err := concurrency.NewSTM(e.etcd, func(s concurrency.STM) error {
				total = 0 // the last (committed) attempt's
				for i := range stmAccounts {
					n, err := strconv.Atoi(s.Get(stmAccount(i)))
					if err != nil {
						return err
					}
					total += n
				}
				return nil
			}, opts...)
			return err
		})
		if err != nil {
			return fmt.Errorf("audit: %w", err)
		}
		if total != stmAccounts*stmBalance {
			return fmt.Errorf("a committed audit saw a total of %d, want %d", total, stmAccounts*stmBalance)
		}
	}
	return nil
}

// retryTimedOut runs f until it ends other than with etcd's "request
// timed out" (a slow machine's raft proposal). A transfer that timed out
// may have been applied: retried, it is one more transfer, and each
// conserves the total, so the check holds either way.
func retryTimedOut(f func() error) error {
	for {
		err := f()
		if !errors.Is(rpctypes.Error(err), rpctypes.ErrTimeout) {
			return err
		}
	}
}

// TestTxnRangeAtPastRevision: a transaction may name past revisions in
// its ranges (clientv3's serializable STM reads every key at its first
// read's revision so, etcdctl's txn a get --rev): each range reads its
// revision as committed before the transaction, the others the
// transaction's state, in the order asked, in the branch the compares
// pick; in a transaction that writes too, where the past range does not
// see its writes. A revision past the store's is etcd's ErrFutureRev, a
// compacted one ErrCompacted, and either leaves the transaction's writes
// unmade. The same steps are checked against a real etcd.
func TestTxnRangeAtPastRevision(t *testing.T) { againstKvdAndEtcd(t, txnRangesAtPast) }

func txnRangesAtPast(t *testing.T, c *clientv3.Client) {
	ctx := t.Context()
	first := put(t, c, "past/k", "1")
	second := put(t, c, "past/k", "2")
	now := put(t, c, "past/other", "x")
	get := func(rev int64) clientv3.Op {
		return clientv3.OpGet("past/k", clientv3.WithRev(rev), clientv3.WithSerializable())
	}
	tests := []struct {
		name  string
		cmps  []clientv3.Cmp
		then  []clientv3.Op
		els   []clientv3.Op
		want  []string // each response's value of past/k ("" none)
		fails string   // a part of the error's message
	}{
		{"one past range", nil, []clientv3.Op{get(first)}, nil, []string{"1"}, ""},
		{"past and current in order", nil, []clientv3.Op{get(second), clientv3.OpGet("past/k"), get(first)}, nil, []string{"2", "2", "1"}, ""},
		{"before the key", nil, []clientv3.Op{get(first - 1)}, nil, []string{""}, ""},
		{"the store's revision", nil, []clientv3.Op{get(now)}, nil, []string{"2"}, ""},
		{"the empty store (revision 1)", nil, []clientv3.Op{get(1)}, nil, []string{""}, ""},
		{"else branch", []clientv3.Cmp{clientv3.Compare(clientv3.Value("past/k"), "=", "1")},
			[]clientv3.Op{get(second)}, []clientv3.Op{get(first)}, []string{"1"}, ""},
		{"future", nil, []clientv3.Op{get(now + 1)}, nil, nil, rpctypes.ErrFutureRev.Error()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := c.Txn(ctx).If(tc.cmps...).Then(tc.then...).Else(tc.els...).Commit()
			if tc.fails != "" {
				if err == nil || !strings.Contains(err.Error(), tc.fails) {
					t.Fatalf("%v, want %v", err, tc.fails)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.Header.Revision != now || len(r.Responses) != len(tc.want) {
				t.Fatalf("header revision %d, %d responses; want %d, %d", r.Header.Revision, len(r.Responses), now, len(tc.want))
			}
			for i, resp := range r.Responses {
				if got := valueOf(resp.GetResponseRange()); got != tc.want[i] {
					t.Errorf("response %d: %q, want %q", i, got, tc.want[i])
				}
			}
		})
	}
	txnRangesAtPastWrite(t, c, first, now)
	if _, err := c.Compact(ctx, second); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Txn(ctx).Then(get(first)).Commit(); !errors.Is(rpctypes.Error(err), rpctypes.ErrCompacted) {
		t.Fatalf("range at a compacted revision: %v, want %v", err, rpctypes.ErrCompacted)
	}
	if _, err := c.Txn(ctx).Then(clientv3.OpPut("past/compacted", "x"), get(first)).Commit(); !errors.Is(rpctypes.Error(err), rpctypes.ErrCompacted) {
		t.Fatalf("range at a compacted revision beside a put: %v, want %v", err, rpctypes.ErrCompacted)
	}
	checkAbsent(t, c, "past/compacted")
}

// txnRangesAtPastWrite: a transaction that writes reads past/k at first
// (its value then, "1") beside its put of past/k, which only its
// current read sees; one whose range names a future revision fails whole.
func txnRangesAtPastWrite(t *testing.T, c *clientv3.Client, first, now int64) {
	ctx := t.Context()
	r, err := c.Txn(ctx).Then(clientv3.OpPut("past/k", "3"), clientv3.OpGet("past/k", clientv3.WithRev(first)), clientv3.OpGet("past/k")).Commit()
	if err != nil {
		t.Fatal(err)
	}
	if got := []string{valueOf(r.Responses[1].GetResponseRange()), valueOf(r.Responses[2].GetResponseRange())}; r.Header.Revision != now+1 || !slices.Equal(got, []string{"1", "3"}) {
		t.Errorf("past and current ranges beside a put: %q at %d, want [1 3] at %d", got, r.Header.Revision, now+1)
	}
	_, err = c.Txn(ctx).Then(clientv3.OpPut("past/future", "x"), clientv3.OpGet("past/k", clientv3.WithRev(now+100))).Commit()
	if !errors.Is(rpctypes.Error(err), rpctypes.ErrFutureRev) {
		t.Fatalf("range at a future revision beside a put: %v, want %v", err, rpctypes.ErrFutureRev)
	}
	checkAbsent(t, c, "past/future")
}

func checkAbsent(t *testing.T, c *clientv3.Client, key string) {
	t.Helper()
	if r, err := c.Get(t.Context(), key); err != nil || len(r.Kvs) != 0 {
		t.Errorf("%s: %v, %v; want it absent (its transaction failed)", key, r, err)
	}
}

func valueOf(r *pb.RangeResponse) string {
	if r == nil || len(r.Kvs) == 0 {
		return ""
	}
	return string(r.Kvs[0].Value)
}
