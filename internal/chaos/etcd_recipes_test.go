package chaos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
)

// clientv3's Mutex and Election, unmodified, against kvd's etcd API on
// three kvd processes (--listen-client-urls), while the kvd leader is
// SIGKILLed and restarted. Holders write a counter inside their critical
// section with a fenced transaction: it commits only while the holder's
// lock key (or candidate key) still exists with the revision it won with.

// recipeWorkers contend for the lock (or the election); recipeWrites is
// the acknowledged fenced writes the test waits for before the kill, after
// it, and after the restart.
const (
	recipeWorkers = 5
	recipeWrites  = 15
	recipeTTL     = 3 // seconds: a session the kill outlasts loses its lock
	recipeTimeout = 3 * time.Minute
)

// etcdProcCluster starts three kvd processes serving etcd's API and
// returns them with their etcd endpoints.
func etcdProcCluster(t *testing.T) (*kvdtest.ProcCluster, []string) {
	t.Helper()
	urls := kvdtest.FreeAddrs(t, 3)
	pc := kvdtest.StartProcClusterOpts(t, procBin(t), 3, kvdtest.ProcOptions{
		PerNode: func(id uint64) []string { return []string{"--listen-client-urls", "http://" + urls[id-1]} },
	})
	leaderOf(t, pc, 20*time.Second)
	c := etcdClientOf(t, urls...)
	wait.NoError(t, "a put through etcd's API", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := c.Put(ctx, "/probe", "ok")
		return err
	})
	return pc, urls
}

// fencedWrite is one fenced increment as its holder saw it.
type fencedWrite struct {
	worker int
	token  int64 // the lock key's (candidate key's) create revision
	value  int   // the counter value it wrote
	rev    int64 // the transaction's revision
}

// fenceLog gathers the outcomes of every worker's fenced writes.
type fenceLog struct {
	mu      sync.Mutex
	acked   []fencedWrite
	refused int // the fence failed: the holder had lost its key
	unknown int // errors: maybe applied
	cond    *sync.Cond
}

func newFenceLog() *fenceLog {
	l := &fenceLog{}
	l.cond = sync.NewCond(&l.mu)
	return l
}

func (l *fenceLog) record(w *fencedWrite, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err != nil:
		l.unknown++
	case w == nil:
		l.refused++
	default:
		l.acked = append(l.acked, *w)
	}
	l.cond.Broadcast()
}

// waitAcked waits until n fenced writes were acknowledged in all.
func (l *fenceLog) waitAcked(ctx context.Context, n int) error {
	stop := context.AfterFunc(ctx, func() { l.mu.Lock(); l.cond.Broadcast(); l.mu.Unlock() })
	defer stop()
	l.mu.Lock()
	defer l.mu.Unlock()
	for len(l.acked) < n {
		if ctx.Err() != nil {
			return fmt.Errorf("%d fenced writes acknowledged, waiting for %d: %w", len(l.acked), n, ctx.Err())
		}
		l.cond.Wait()
	}
	return nil
}

// holder is what a recipe gives a worker while it holds: the guard that
// holds only while it still does, and its fencing token.
type holder struct {
	guard clientv3.Cmp
	token int64
}

// recipe is a way to become the single holder: a Mutex or an Election.
type recipe interface {
	acquire(ctx context.Context, s *concurrency.Session, worker int) (holder, error)
	release(ctx context.Context) error
}

// fencedIncrement reads the counter and writes it plus one, with a log
// entry naming the writer, if h's guard holds.
func fencedIncrement(ctx context.Context, c *clientv3.Client, h holder, worker int) (*fencedWrite, error) {
	r, err := c.Get(ctx, "/fence/counter")
	if err != nil {
		return nil, err
	}
	n := 0
	if len(r.Kvs) == 1 {
		n, _ = strconv.Atoi(string(r.Kvs[0].Value))
	}
	w := fencedWrite{worker: worker, token: h.token, value: n + 1}
	tr, err := c.Txn(ctx).If(h.guard).Then(
		clientv3.OpPut("/fence/counter", strconv.Itoa(w.value)),
		clientv3.OpPut(fmt.Sprintf("/fence/log/%08d", w.value), fmt.Sprintf("%d/%d", worker, h.token)),
	).Commit()
	if err != nil || !tr.Succeeded {
		return nil, err
	}
	w.rev = tr.Header.Revision
	return &w, nil
}

// runWorker holds the recipe over and over until ctx ends, making two
// fenced increments each time; a session that ends is replaced.
func runWorker(ctx context.Context, c *clientv3.Client, newRecipe func(*concurrency.Session) recipe, worker int, log *fenceLog) {
	for ctx.Err() == nil {
		s, err := concurrency.NewSession(c, concurrency.WithTTL(recipeTTL), concurrency.WithContext(ctx))
		if err != nil {
			time.Sleep(100 * time.Millisecond) // no quorum yet: try again
			continue
		}
		rc := newRecipe(s)
		for ctx.Err() == nil && !isDone(s) {
			opCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
			h, err := rc.acquire(opCtx, s, worker)
			if err == nil {
				for range 2 {
					log.record(fencedIncrement(opCtx, c, h, worker))
				}
				rc.release(opCtx)
			}
			cancel()
		}
		s.Close()
	}
}

func isDone(s *concurrency.Session) bool {
	select {
	case <-s.Done():
		return true
	default:
		return false
	}
}

type mutexRecipe struct{ m *concurrency.Mutex }

func (r *mutexRecipe) acquire(ctx context.Context, _ *concurrency.Session, _ int) (holder, error) {
	if err := r.m.Lock(ctx); err != nil {
		return holder{}, err
	}
	return holder{guard: r.m.IsOwner(), token: r.m.Header().Revision}, nil
}

func (r *mutexRecipe) release(ctx context.Context) error { return r.m.Unlock(ctx) }

type electionRecipe struct{ e *concurrency.Election }

func (r *electionRecipe) acquire(ctx context.Context, _ *concurrency.Session, worker int) (holder, error) {
	if err := r.e.Campaign(ctx, fmt.Sprint(worker)); err != nil {
		return holder{}, err
	}
	if err := r.e.Proclaim(ctx, fmt.Sprintf("%d leads", worker)); err != nil {
		return holder{}, err
	}
	return holder{guard: clientv3.Compare(clientv3.CreateRevision(r.e.Key()), "=", r.e.Rev()), token: r.e.Rev()}, nil
}

func (r *electionRecipe) release(ctx context.Context) error { return r.e.Resign(ctx) }

// TestEtcdRecipesUnderLeaderKill: clientv3's Mutex and Election, with
// recipeWorkers contending, while the kvd leader is SIGKILLed and later
// restarted. Every acknowledged fenced write is in the counter's history
// (none lost, none written twice over: the log entry of each value names
// its writer), and fenced writes ordered by revision have non-decreasing
// tokens: two holders never both wrote while holding.
func TestEtcdRecipesUnderLeaderKill(t *testing.T) {
	pc, urls := etcdProcCluster(t)
	recipes := []struct {
		name   string
		prefix string
		make   func(s *concurrency.Session) recipe
	}{
		{"mutex", "/recipes/lock", func(s *concurrency.Session) recipe {
			return &mutexRecipe{concurrency.NewMutex(s, "/recipes/lock")}
		}},
		{"election", "/recipes/election", func(s *concurrency.Session) recipe {
			return &electionRecipe{concurrency.NewElection(s, "/recipes/election")}
		}},
	}
	for _, rc := range recipes {
		t.Run(rc.name, func(t *testing.T) {
			c := etcdClientOf(t, urls...)
			ctx, cancel := context.WithTimeout(t.Context(), recipeTimeout)
			defer cancel()
			if _, err := c.Delete(ctx, "/fence/", clientv3.WithPrefix()); err != nil {
				t.Fatal(err)
			}
			log := newFenceLog()
			workCtx, stop := context.WithCancel(ctx)
			var wg sync.WaitGroup
			for w := range recipeWorkers {
				wc := etcdClientOf(t, urls...)
				wg.Add(1)
				go func() {
					defer wg.Done()
					runWorker(workCtx, wc, rc.make, w, log)
				}()
			}
			step := func(what string, n int) {
				if err := log.waitAcked(ctx, n); err != nil {
					stop()
					wg.Wait()
					t.Fatalf("%s: %v", what, err)
				}
			}
			var observed []int64 // the leader keys' create revisions, as Observe saw them
			var obsDone chan struct{}
			if rc.name == "election" {
				obsDone = make(chan struct{})
				obs := observer(t, urls, rc.prefix)
				go func() {
					defer close(obsDone)
					for r := range obs.Observe(workCtx) {
						observed = append(observed, r.Kvs[0].CreateRevision)
					}
				}()
			}
			step("before the kill", recipeWrites)
			if rc.name == "election" {
				checkLeader(t, ctx, observer(t, urls, rc.prefix))
			}
			l := leaderOf(t, pc, 20*time.Second)
			l.Kill()
			step("with the leader killed", 2*recipeWrites)
			if err := l.Start(); err != nil {
				t.Fatal(err)
			}
			step("after the restart", 3*recipeWrites)
			stop()
			wg.Wait()
			checkFencedWrites(t, c, log)
			if obsDone != nil {
				<-obsDone
				t.Logf("Observe saw %d leader changes or proclamations", len(observed))
				if len(observed) < 2 || !slices.IsSorted(observed) {
					t.Errorf("Observe saw leaders with keys created at %v; want several, in the order they were created", observed)
				}
			}
		})
	}
	t.Run("expired holder", func(t *testing.T) { expiredHolderLosesLock(t, pc, urls) })
}

// observer is an election on prefix of a session of its own, to observe
// it.
func observer(t *testing.T, urls []string, prefix string) *concurrency.Election {
	t.Helper()
	s, err := concurrency.NewSession(etcdClientOf(t, urls...), concurrency.WithTTL(recipeTTL))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return concurrency.NewElection(s, prefix)
}

// checkLeader: Leader names a candidate that campaigned (its value is a
// worker's), or there is none at this moment.
func checkLeader(t *testing.T, ctx context.Context, e *concurrency.Election) {
	t.Helper()
	r, err := e.Leader(ctx)
	if errors.Is(err, concurrency.ErrElectionNoLeader) {
		return
	}
	if err != nil || len(r.Kvs) != 1 {
		t.Fatalf("Leader: %v, %v", r, err)
	}
	if v := string(r.Kvs[0].Value); !strings.HasSuffix(v, " leads") && strings.Trim(v, "0123456789") != "" {
		t.Fatalf("Leader's value %q is no worker's", v)
	}
}

// expiredHolderLosesLock: a holder whose session stops renewing its lease
// while the leader is killed loses the lock when the lease expires: the
// next waiter gets it, and the old holder's fenced write is refused while
// the new one's commits.
func expiredHolderLosesLock(t *testing.T, pc *kvdtest.ProcCluster, urls []string) {
	ctx, cancel := context.WithTimeout(t.Context(), recipeTimeout)
	defer cancel()
	c := etcdClientOf(t, urls...)
	s1, err := concurrency.NewSession(c, concurrency.WithTTL(recipeTTL))
	if err != nil {
		t.Fatal(err)
	}
	m1 := concurrency.NewMutex(s1, "/recipes/expire")
	if err := m1.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	old := holder{guard: m1.IsOwner(), token: m1.Header().Revision}
	s1.Orphan() // no more keepalives: its lease runs out
	l := leaderOf(t, pc, 20*time.Second)
	l.Kill()
	s2, err := concurrency.NewSession(etcdClientOf(t, urls...), concurrency.WithTTL(recipeTTL), concurrency.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	m2 := concurrency.NewMutex(s2, "/recipes/expire")
	if err := m2.Lock(ctx); err != nil {
		t.Fatalf("the waiter never got the lock of a holder whose lease stopped: %v", err)
	}
	if err := l.Start(); err != nil {
		t.Fatal(err)
	}
	cur := holder{guard: m2.IsOwner(), token: m2.Header().Revision}
	for _, tc := range []struct {
		name string
		h    holder
		want bool
	}{
		{"the expired holder", old, false},
		{"the new holder", cur, true},
	} {
		var w *fencedWrite
		wait.NoError(t, tc.name+"'s fenced write", func() (err error) {
			w, err = fencedIncrement(ctx, c, tc.h, 0)
			return err
		})
		if (w != nil) != tc.want {
			t.Errorf("%s (token %d): fenced write committed %v, want %v", tc.name, tc.h.token, w != nil, tc.want)
		}
	}
}

// checkFencedWrites checks the counter and its log against what the
// workers were told.
func checkFencedWrites(t *testing.T, c *clientv3.Client, log *fenceLog) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var r *clientv3.GetResponse
	wait.NoError(t, "reading the fence log", func() (err error) {
		r, err = c.Get(ctx, "/fence/", clientv3.WithPrefix())
		return err
	})
	written := map[int]string{}
	counter := 0
	for _, kv := range r.Kvs {
		switch k := string(kv.Key); {
		case k == "/fence/counter":
			counter, _ = strconv.Atoi(string(kv.Value))
		default:
			n, _ := strconv.Atoi(k[len("/fence/log/"):])
			written[n] = string(kv.Value)
		}
	}
	acked := slices.Clone(log.acked)
	t.Logf("%d fenced writes acknowledged, %d refused by the fence (the holder's key was gone), %d failed (maybe applied); counter %d",
		len(acked), log.refused, log.unknown, counter)
	if counter < len(acked) || counter > len(acked)+log.unknown || len(written) != counter {
		t.Errorf("counter %d with %d log entries; want between %d acknowledged and %d with the maybe-applied, one entry per value",
			counter, len(written), len(acked), len(acked)+log.unknown)
	}
	for _, w := range acked {
		if got, want := written[w.value], fmt.Sprintf("%d/%d", w.worker, w.token); got != want {
			t.Errorf("value %d: the log names %q, but worker %d holding token %d was told its write of it succeeded", w.value, got, w.worker, w.token)
		}
	}
	slices.SortFunc(acked, func(a, b fencedWrite) int { return int(a.rev - b.rev) })
	for i := 1; i < len(acked); i++ {
		if a, b := acked[i-1], acked[i]; b.token < a.token {
			t.Errorf("holder %d (token %d) wrote at revision %d after holder %d (token %d) wrote at %d: two holders at once",
				b.worker, b.token, b.rev, a.worker, a.token, a.rev)
		}
	}
}
