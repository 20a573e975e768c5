package rdma

import (
	"errors"
	"testing"
	"time"
)

// The acceptor caps each READ depth by its own limit for the same role:
// rdma_cm has already turned the request's values round. On a device whose
// two limits differ, swapping them again would grant the dialer fewer
// responder resources than the READs it will issue.
func TestAcceptDepths(t *testing.T) {
	cases := []struct {
		name               string
		maxRd, maxInit     int // the acceptor's device
		reqResp, reqInit   int // the request event, acceptor's view
		wantResp, wantInit int
	}{
		// Dialer with responder resources 4 and initiator depth 16: it
		// issues up to 16 READs (event responder_resources 16) and serves 4
		// (event initiator_depth 4).
		{"dialer reads more than it serves", 16, 16, 16, 4, 16, 4},
		{"acceptor serves fewer", 8, 16, 16, 4, 8, 4},
		{"acceptor issues fewer", 16, 2, 16, 4, 16, 2},
		{"equal", 128, 128, 128, 128, 128, 128},
	}
	for _, tc := range cases {
		resp, init := acceptDepths(tc.maxRd, tc.maxInit, tc.reqResp, tc.reqInit)
		if resp != tc.wantResp || init != tc.wantInit {
			t.Errorf("%s: acceptDepths = responder %d, initiator %d; want %d, %d", tc.name, resp, init, tc.wantResp, tc.wantInit)
		}
	}
}

func TestAckTimeoutExp(t *testing.T) {
	cases := []struct {
		d    time.Duration
		want int
	}{
		{time.Nanosecond, 1},
		{8192 * time.Nanosecond, 1},
		{8193 * time.Nanosecond, 2},
		{DefaultAckTimeout, defaultAckExp},
		{DefaultAckTimeout - 1, defaultAckExp},
		{DefaultAckTimeout + 1, defaultAckExp + 1},
		{10 * time.Millisecond, 12},
		{time.Hour * 3, maxAckExp},
	}
	for _, tc := range cases {
		if got := ackTimeoutExp(tc.d); got != tc.want {
			t.Errorf("ackTimeoutExp(%v) = %d, want %d", tc.d, got, tc.want)
		}
	}
	if got := ackTimeoutOf(defaultAckExp); got != 67108864*time.Nanosecond {
		t.Errorf("ackTimeoutOf(14) = %v", got)
	}
}

// The documented bounds: with the defaults a dead host is noticed within
// about 0.47s when work is outstanding and 1.1s when idle, 2.5s at worst.
func TestDeadPeerBound(t *testing.T) {
	busy, idle, worst := Config{}.DeadPeerBound()
	if busy != 7*DefaultAckTimeout || idle != busy+DefaultKeepAlive*5/4 || worst != 4*busy+DefaultKeepAlive*5/4 {
		t.Fatalf("DeadPeerBound() = %v, %v, %v", busy, idle, worst)
	}
	if busy < 300*time.Millisecond || idle > 2*time.Second || worst > 3*time.Second {
		t.Fatalf("default bounds %v busy, %v idle, %v worst: not in the documented range", busy, idle, worst)
	}
	busy, idle, _ = Config{AckTimeout: 10 * time.Millisecond, RetryCount: 3, KeepAlive: -1}.DeadPeerBound()
	if busy != 4*ackTimeoutOf(12) || idle != 0 {
		t.Fatalf("DeadPeerBound(10ms, 3 retries, no keepalive) = %v, %v", busy, idle)
	}
	if busy, idle, worst := (Config{AckTimeout: -1}).DeadPeerBound(); busy != 0 || idle != 0 || worst != 0 {
		t.Fatalf("DeadPeerBound with the connection manager's timeout = %v, %v, %v; want unknown", busy, idle, worst)
	}
}

func TestConfigValidateTuning(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"tos", Config{TOS: 0x60}, true},
		{"tos max", Config{TOS: 255}, true},
		{"tos too big", Config{TOS: 256}, false},
		{"tos negative", Config{TOS: -1}, false},
		{"ack timeout", Config{AckTimeout: time.Millisecond}, true},
		{"cm's ack timeout", Config{AckTimeout: -1}, true},
		{"ack timeout too long", Config{AckTimeout: 3 * time.Hour}, false},
		{"retries", Config{RetryCount: 3}, true},
		{"too many retries", Config{RetryCount: 8}, false},
		{"negative retries", Config{RetryCount: -1}, false},
		{"no keepalive", Config{KeepAlive: -1}, true},
	}
	for _, tc := range cases {
		if err := tc.cfg.Validate(); (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrConfig)) {
			t.Errorf("%s: Validate = %v", tc.name, err)
		}
	}
	c := Config{}.withDefaults()
	if c.idTOS() != -1 || c.idAckExp() != defaultAckExp {
		t.Errorf("default id options: tos %d, ack exponent %d", c.idTOS(), c.idAckExp())
	}
	if c = (Config{TOS: 0x60, AckTimeout: -1}).withDefaults(); c.idTOS() != 0x60 || c.idAckExp() != 0 {
		t.Errorf("id options of %+v: tos %d, ack exponent %d", c, c.idTOS(), c.idAckExp())
	}
}

// A keepalive goes out after keepAliveTicks ticks without a completion, on
// a connection whose peer grants READ, never while one is outstanding.
func TestKeepAliveTick(t *testing.T) {
	var k keepAliveState
	for i := range 10 {
		if k.tick(false) {
			t.Fatalf("tick %d: keepalive on a connection not handed out", i)
		}
	}
	fired := 0
	for i := range 3 * keepAliveTicks {
		if k.tick(true) {
			fired++
			if i%keepAliveTicks != keepAliveTicks-1 {
				t.Fatalf("keepalive at tick %d", i)
			}
		}
	}
	if fired != 3 {
		t.Fatalf("%d keepalives in %d idle ticks, want 3", fired, 3*keepAliveTicks)
	}
	for range keepAliveTicks - 1 {
		k.tick(true)
	}
	k.activity.Add(1) // a completion
	if k.tick(true) {
		t.Fatal("keepalive right after a completion")
	}
	k.out.Store(true)
	for i := range 3 * keepAliveTicks {
		if k.tick(true) {
			t.Fatalf("tick %d: second keepalive while one is outstanding", i)
		}
	}
}

// Memory per connection (package doc, "Memory"): with the defaults an
// accepted connection, which never reads, registers less than 1 MiB, and
// READ staging is only for connections that read.
func TestPinnedDefaults(t *testing.T) {
	if n := connBufferBytes(Config{}); n > 1<<20-4096 {
		t.Errorf("a connection's buffers: %d bytes, want at most 1 MiB with page rounding", n)
	}
	if n := stagingBytes(Config{}); n != 2<<20 {
		t.Errorf("READ staging: %d bytes, want 2 MiB", n)
	}
	if c := (Config{}).withDefaults(); c.RecvBuffers <= c.Credits {
		t.Errorf("default RecvBuffers %d not above Credits %d: queued messages would starve the sender", c.RecvBuffers, c.Credits)
	}
}
