package putgroup_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/kvd-project/kvd/internal/kvdtest/wait"
	"github.com/kvd-project/kvd/internal/putgroup"
)

// TestPutAllQueuesItsRunInOrder holds a group while a run of 200 PUTs of
// one key and then a lone PUT queue behind it: the run fills the next
// groups in order, the lone PUT joins its last group, and the key ends
// with the run's last value.
func TestPutAllQueuesItsRunInOrder(t *testing.T) {
	kc := startClient(t, 1)

	var mu sync.Mutex
	var sizes []int
	gate := make(chan struct{})
	release := sync.OnceFunc(func() { close(gate) })
	defer release()
	g, err := putgroup.New(putgroup.Config{Client: kc, Knobs: putgroup.Knobs{BeforeCommit: func(n int) {
		mu.Lock()
		sizes = append(sizes, n)
		first := len(sizes) == 1
		mu.Unlock()
		if first {
			<-gate
		}
	}}})
	if err != nil {
		t.Fatal(err)
	}
	bg := context.Background()
	done := make(chan error, 3)
	go func() { _, err := g.Put(bg, []byte("held"), []byte("v")); done <- err }()
	wait.For(t, "the first group to be held", func() bool { mu.Lock(); defer mu.Unlock(); return len(sizes) == 1 })
	run := make([]putgroup.KV, 200)
	for i := range run {
		run[i] = putgroup.KV{Key: []byte("k"), Value: []byte(fmt.Sprint(i))}
	}
	go func() {
		for i, err := range g.PutAll(bg, run) {
			if err != nil {
				done <- fmt.Errorf("put %d of the run: %w", i, err)
				return
			}
		}
		done <- nil
	}()
	wait.For(t, "the run to queue", func() bool { return g.Waiting() == len(run) })
	go func() { _, err := g.Put(bg, []byte("lone"), []byte("v")); done <- err }()
	wait.For(t, "the lone PUT to queue", func() bool { return g.Waiting() == len(run)+1 })
	release()
	for range 3 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if want := []int{1, 128, 73}; !slices.Equal(sizes, want) {
		t.Errorf("groups %v, want %v", sizes, want)
	}
	v, err := kc.Get(bg, []byte("k"))
	if err != nil || string(v) != "199" {
		t.Errorf("k = %q, %v; want the run's last value 199", v, err)
	}
}
