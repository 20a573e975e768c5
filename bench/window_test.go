package bench

import (
	"math"
	"testing"
	"time"

	"github.com/kvd-project/kvd/bench/workload"
	"github.com/kvd-project/kvd/client"
)

// TestThroughputOverTheMeasuredPart: the operations counted are those
// started in the measured part, so ops/s divides by that part (t0..end),
// not by the time until the last of them finished (t1): with 200 ms
// operations at the end of a 400 ms point, 8 clients doing 40/s were
// reported at 31.8/s. The servers' CPU, read after the last operation,
// is over t0..t1, and its idle part is subtracted over the same span.
func TestThroughputOverTheMeasuredPart(t *testing.T) {
	r := newRunner(t, Config{ServerPIDs: []int{1}, IdleServerCPU: 0.5}, newFake())
	w := newWorker()
	w.gets = 16
	t0 := time.Unix(1000, 0)
	win := window{t0: t0, end: t0.Add(400 * time.Millisecond), t1: t0.Add(600 * time.Millisecond), cpu1: time.Second}
	p := Point{Workload: small(workload.ReadOnly), Clients: 1}
	run := r.collect(&p, []*worker{w}, win)
	if run.Seconds != 0.4 || run.Throughput != 40 {
		t.Errorf("16 operations started in a 400 ms part: %.3f s, %.1f ops/s; want 0.4 s, 40 ops/s", run.Seconds, run.Throughput)
	}
	// 1 s of CPU over 600 ms with 0.5 cores idle: 0.7 s net, 43750 µs/op.
	if math.Abs(run.ServerCPUNetPerOp-0.7/16*1e6) > 1 {
		t.Errorf("net CPU per op %.0f µs, want %.0f", run.ServerCPUNetPerOp, 0.7/16*1e6)
	}
}

// countingStore is a fake whose GETs fail every other time, counted as the
// client counts them: every call in Gets, the successful ones in OneSided.
type countingStore struct {
	*fakeStore
	oneSided, rounds uint64
}

func (s *countingStore) Stats() client.Stats {
	st := s.fakeStore.Stats()
	st.Gets, st.OneSided, st.OneSidedRounds, st.OneSidedReads, st.OneSidedBytes = 2*s.oneSided, s.oneSided, s.rounds, 3*s.rounds, 350*s.rounds
	return st
}

// TestPerOneSidedGetCountsSuccessfulOnes: rounds, READs and bytes per
// one-sided GET are over the GETs the client answered one-sided; failed
// GETs (in the client's Gets, in neither OneSided nor RPCGets) halved them.
func TestPerOneSidedGetCountsSuccessfulOnes(t *testing.T) {
	s := &countingStore{fakeStore: newFake()}
	r := newRunner(t, Config{}, s)
	st0 := r.clientStats()
	s.oneSided, s.rounds = 100, 200 // 200 GETs, 100 answered one-sided in 2 rounds each
	win := window{st0: st0, st1: r.clientStats()}
	p := Point{Workload: small(workload.ReadOnly), Clients: 1}
	run := r.collect(&p, []*worker{newWorker()}, win)
	if rt, reads, b := run.RoundsPerOneSidedGet(), run.ReadsPerOneSidedGet(), run.BytesPerOneSidedGet(); rt != 2 || reads != 6 || b != 700 {
		t.Errorf("per one-sided GET: %.2f rounds, %.2f READs, %.0f B; want 2, 6, 700", rt, reads, b)
	}
}
