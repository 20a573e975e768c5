package server

import (
	"sync"
	"testing"

	"github.com/kvd-project/kvd/internal/kvdtest/wait"
)

// TestWorkersAreReused: requests that come one at a time are all served by
// one goroutine; requests served at once each get one; afterwards at most
// maxIdleWorkers wait for more, and every one ends when the connection
// does.
func TestWorkersAreReused(t *testing.T) {
	var wg sync.WaitGroup
	release := make(chan struct{})
	var mu sync.Mutex
	served := 0
	w := &workers{wg: &wg, sem: make(chan struct{}, maxInflightPerConn), jobs: make(chan *job)}
	w.serve = func(j *job) {
		if j.reserve == 1 { // held until released
			<-release
		}
		mu.Lock()
		served++
		mu.Unlock()
	}
	servedAll := func(n int) func() bool {
		return func() bool { mu.Lock(); defer mu.Unlock(); return served == n }
	}

	const oneAtATime = 100
	for i := range oneAtATime {
		w.sem <- struct{}{}
		w.hand(&job{})
		wait.For(t, "the request served and its worker idle", func() bool { return servedAll(i+1)() && w.idle.Load() == 1 })
	}
	if got := w.started.Load(); got != 1 {
		t.Errorf("%d requests one at a time started %d goroutines, want 1", oneAtATime, got)
	}

	const atOnce = 10
	for range atOnce {
		w.sem <- struct{}{}
		w.hand(&job{reserve: 1})
	}
	if got := w.started.Load(); got != atOnce {
		t.Errorf("%d requests at once: %d goroutines started in all, want %d (the idle one and %d new)", atOnce, got, atOnce, atOnce-1)
	}
	close(release)
	wait.For(t, "every request served", servedAll(oneAtATime+atOnce))
	wait.For(t, "the workers done", func() bool { return len(w.sem) == 0 && w.idle.Load() == maxIdleWorkers })
	// The idle ones take the next requests: no goroutine is started.
	for range maxIdleWorkers {
		w.sem <- struct{}{}
		w.hand(&job{})
	}
	wait.For(t, "the last requests served", servedAll(oneAtATime+atOnce+maxIdleWorkers))
	if got := w.started.Load(); got != atOnce {
		t.Errorf("%d goroutines started in all, want %d", got, atOnce)
	}

	close(w.jobs)
	wg.Wait() // every worker ends with the connection
}
