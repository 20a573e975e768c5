//go:build rdma

package rdma

import (
	"testing"
	"time"
)

// closedTransport is a Transport as Close leaves it, built without a
// device: Close has waited for its connections and released the PD, the
// CQs and the completion channel (here: never allocated).
func closedTransport(t *testing.T) *Transport {
	t.Helper()
	tr := blank(Config{})
	close(tr.pollDone) // no reaper
	close(tr.kaDone)   // no keepalive goroutine
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	return tr
}

// A Dial (or Register) that passed its t.closed check just before Close
// must not start using the device once Close has stopped waiting for
// connections: Close then frees the PD, the CQs and the completion
// channel, and the new connection's setup (ibv_reg_mr on t.pd,
// ibv_create_cq on t.comp) would use them after they were freed.
// newConn counts a connection with connStarted; once Close has returned,
// that must refuse.
func TestNoConnStartsAfterClose(t *testing.T) {
	tr := closedTransport(t)
	tr.connStarted() // what newConn does for a Dial that raced Close
	tr.liveMu.Lock()
	live := tr.live
	tr.liveMu.Unlock()
	if live != 0 {
		t.Fatalf("a connection started after Transport.Close returned (live = %d): it would register memory with the freed PD and create a CQ on the destroyed completion channel", live)
	}
}

// fakeConn is a connection of a transport without a device, as newConn
// leaves it before setup: teardown runs on it without touching C.
func fakeConn(t *testing.T) (*Transport, *conn) {
	t.Helper()
	tr := &Transport{
		conns:     make(map[uint32]*conn),
		listeners: make(map[*listener]struct{}),
		regions:   make(map[*region]struct{}),
	}
	tr.liveCond.L = &tr.liveMu
	tr.cfg = Config{}.withDefaults()
	c, err := newConn(tr, cmID{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tr, c
}

// Teardown can start while the goroutine setting a connection up (dial,
// listener.request) is between two calls on its id and queue pair: the
// connection is reachable (Transport.Close, the poller, the authentication
// deadline) from addConn or startAuth on. Teardown must wait out a step in
// progress, and no step may run once it has begun.
func TestTeardownWaitsOutSetupStep(t *testing.T) {
	_, c := fakeConn(t)
	inStep, release := make(chan struct{}), make(chan struct{})
	stepDone := make(chan error, 1)
	go func() {
		stepDone <- c.step(func() error {
			close(inStep)
			<-release
			return nil
		})
	}()
	<-inStep
	c.fail(errLocalClose)
	time.Sleep(50 * time.Millisecond) // teardown would be done by now
	select {
	case <-c.done:
		t.Fatal("teardown finished while a setup step was using the id and the queue pair")
	default:
	}
	close(release)
	if err := <-stepDone; err != nil {
		t.Fatalf("step: %v", err)
	}
	<-c.done
	ran := false
	if err := c.step(func() error { ran = true; return nil }); err == nil || ran {
		t.Fatalf("a setup step ran after teardown (err %v)", err)
	}
}
