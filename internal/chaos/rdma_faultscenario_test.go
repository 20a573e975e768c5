//go:build rdma

package chaos

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/kvd-project/kvd/client"
)

// faultScenario is the schedule TestRDMAFreezeLinearizable and
// TestRDMAPartitionLinearizable share: clients recorded into one history,
// a gate that pauses every writer while the controller writes a value to
// every key, and a fault (a frozen or an isolated leader) that a fatal
// error undoes before it stops the clients, so that none outlives the test
// or waits on a frozen peer.
type faultScenario struct {
	t         *testing.T
	rec       *freezeRecorder
	keys      int
	opTimeout time.Duration
	undo      func() // ends the fault; safe to call when there is none

	stop    chan struct{}
	gate    sync.RWMutex // writers hold it shared; Lock pauses all writes
	wg      sync.WaitGroup
	stopped bool
	pinned  []*client.Client // the clients that know only the faulty leader
}

func newFaultScenario(t *testing.T, keys int, opTimeout time.Duration) *faultScenario {
	return &faultScenario{t: t, rec: &freezeRecorder{start: time.Now()}, keys: keys, opTimeout: opTimeout,
		undo: func() {}, stop: make(chan struct{})}
}

// start runs a recorded client until stopClients.
func (s *faultScenario) start(kind string, id int, c *client.Client, readOnly bool) {
	if kind == "pinned" {
		s.pinned = append(s.pinned, c)
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.rec.run(kind, id, c, s.keys, readOnly, &s.gate, s.opTimeout, s.stop)
	}()
}

func (s *faultScenario) stopClients() {
	if !s.stopped {
		s.stopped = true
		close(s.stop)
		s.wg.Wait()
	}
}

// fatalf ends the fault and stops the clients first.
func (s *faultScenario) fatalf(format string, args ...any) {
	s.t.Helper()
	s.undo()
	s.stopClients()
	s.t.Fatalf(format, args...)
}

// pinnedRetries sums why the pinned clients' one-sided attempts were
// retried.
func (s *faultScenario) pinnedRetries() map[string]uint64 {
	sum := map[string]uint64{}
	for _, c := range s.pinned {
		for k, v := range c.Stats().Retries {
			sum[k] += v
		}
	}
	return sum
}

// writeAll has the controller (as client id) write prefix+key to every
// key, each acknowledged, with the writers paused (the caller holds gate).
// It returns the values and when the last was acknowledged.
func (s *faultScenario) writeAll(c *client.Client, id int, prefix string) (map[string]string, int64) {
	vals := map[string]string{}
	var last int64
	for k := 0; k < s.keys; k++ {
		key := fmt.Sprintf("k%d", k)
		v, ret, ok := s.rec.putAcked("ctl", id, c, key, prefix+key, 20*time.Second)
		if !ok {
			s.gate.Unlock()
			s.fatalf("the write of %s%s was never acknowledged", prefix, key)
		}
		vals[key] = v
		last = max(last, ret)
	}
	return vals, last
}

// retriedSince is the retries counted after before.
func retriedSince(before, after map[string]uint64) map[string]uint64 {
	d := map[string]uint64{}
	for k, v := range after {
		if n := v - before[k]; n > 0 {
			d[k] = n
		}
	}
	return d
}

// faultHistory turns the recorded operations into porcupine's, leaving out
// failed GETs (a failed read has no effect), after passing each to see.
func faultHistory(ops []freezeOp, see func(freezeOp)) (hist []porcupine.Operation, completed, maybe int) {
	for _, o := range ops {
		see(o)
		if o.in.Op == "get" && o.failed {
			continue
		}
		if o.out.Unknown {
			maybe++
		} else {
			completed++
		}
		hist = append(hist, o.op())
	}
	return hist, completed, maybe
}

// faultVerdict is what the tests print of porcupine's result.
func faultVerdict(res porcupine.CheckResult) string {
	switch res {
	case porcupine.Ok:
		return "linearizable"
	case porcupine.Illegal:
		return "NOT linearizable"
	}
	return "inconclusive (" + string(res) + ")"
}

// judgeFault fails the test unless porcupine found the history linearizable and
// agrees with freezeStale; on a violation it writes a visualization, which
// the line marked tag names, and calls explain first.
func judgeFault(t *testing.T, tag, name string, res porcupine.CheckResult, info porcupine.LinearizationInfo,
	ops []freezeOp, stale map[int]freezeReplaced, explain func()) {
	t.Helper()
	switch res {
	case porcupine.Ok:
		if len(stale) > 0 {
			t.Fatalf("porcupine accepted a history with %d definitely stale reads: the recording or the model is wrong", len(stale))
		}
	case porcupine.Illegal:
		path := filepath.Join(os.TempDir(), name+".html")
		if err := porcupine.VisualizePath(kvModel, info, path); err == nil {
			fmt.Printf("%s: visualization: %s (inside the VM)\n", tag, path)
		}
		explain()
		t.Fatalf("history is not linearizable: %d GETs returned a value that an acknowledged write had already replaced (%d of them from the pinned clients, which can only READ the old leader's region)",
			len(stale), countKind(ops, stale, "pinned"))
	default:
		t.Fatalf("linearizability check inconclusive: %s", res)
	}
}
