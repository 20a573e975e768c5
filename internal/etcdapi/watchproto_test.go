package etcdapi_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/etcdapi"
)

// rawWatch is a Watch stream spoken to directly, to see exactly what the
// server sends.
type rawWatch struct {
	t      testing.TB
	stream pb.Watch_WatchClient
	resps  chan *pb.WatchResponse
}

func (e *env) rawWatch(t testing.TB) *rawWatch {
	t.Helper()
	stream, err := pb.NewWatchClient(e.etcd.ActiveConnection()).Watch(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	w := &rawWatch{t: t, stream: stream, resps: make(chan *pb.WatchResponse, 1<<16)}
	go func() {
		defer close(w.resps)
		for {
			r, err := stream.Recv()
			if err != nil {
				return
			}
			w.resps <- r
		}
	}()
	return w
}

func (w *rawWatch) send(req *pb.WatchRequest) {
	w.t.Helper()
	if err := w.stream.Send(req); err != nil {
		w.t.Fatal(err)
	}
}

func (w *rawWatch) create(c *pb.WatchCreateRequest) {
	w.t.Helper()
	w.send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: c}})
}

func (w *rawWatch) recv() *pb.WatchResponse {
	w.t.Helper()
	select {
	case r, ok := <-w.resps:
		if !ok {
			w.t.Fatal("watch stream ended")
		}
		return r
	case <-time.After(20 * time.Second):
		w.t.Fatal("no watch response")
	}
	return nil
}

func TestWatchStreamIDsCancelAndProgressAsEtcd(t *testing.T) {
	e := start(t, 1, etcdapi.Config{})
	e.put(t, "first", "v") // a store revision past 0 for the headers
	w := e.rawWatch(t)
	steps := []struct {
		name string
		req  *pb.WatchRequest
		want string // the response, as describe prints it; "" none
	}{
		{"auto id from 0", createReq(&pb.WatchCreateRequest{Key: []byte("a")}), "id=0 created"},
		{"auto id next", createReq(&pb.WatchCreateRequest{Key: []byte("b")}), "id=1 created"},
		{"chosen id", createReq(&pb.WatchCreateRequest{Key: []byte("c"), WatchId: 7}), "id=7 created"},
		{"duplicate id", createReq(&pb.WatchCreateRequest{Key: []byte("c"), WatchId: 7}),
			"id=-1 created canceled reason=mvcc: duplicate watch ID provided on the WatchStream"},
		{"empty range", createReq(&pb.WatchCreateRequest{Key: []byte("b"), RangeEnd: []byte("a")}),
			"id=-1 created canceled reason=mvcc: watcher range is empty"},
		{"negative start", createReq(&pb.WatchCreateRequest{Key: []byte("b"), StartRevision: -1}),
			"id=-1 created canceled reason=kvd: start revision must not be negative"},
		{"cancel", cancelReq(1), "id=1 canceled"},
		{"cancel unknown: no answer", cancelReq(99), ""},
		{"progress", &pb.WatchRequest{RequestUnion: &pb.WatchRequest_ProgressRequest{ProgressRequest: &pb.WatchProgressRequest{}}},
			"id=-1"},
	}
	for _, s := range steps {
		w.send(s.req)
		if s.want == "" {
			continue
		}
		r := w.recv()
		if got := describe(r); got != s.want {
			t.Errorf("%s: response %q, want %q", s.name, got, s.want)
		}
		if r.Header.GetRevision() == 0 {
			t.Errorf("%s: response without a header revision", s.name)
		}
	}
	// Events after all that go to the watch they belong to.
	e.put(t, "c", "v")
	if r := w.recv(); r.WatchId != 7 || len(r.Events) != 1 || string(r.Events[0].Kv.Key) != "c" {
		t.Errorf("event response %v, want watch 7's put of c", r)
	}
}

func createReq(c *pb.WatchCreateRequest) *pb.WatchRequest {
	return &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: c}}
}

func cancelReq(id int64) *pb.WatchRequest {
	return &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CancelRequest{CancelRequest: &pb.WatchCancelRequest{WatchId: id}}}
}

// describe is a control response in short: its id and flags.
func describe(r *pb.WatchResponse) string {
	s := fmt.Sprintf("id=%d", r.WatchId)
	if r.Created {
		s += " created"
	}
	if r.Canceled {
		s += " canceled"
	}
	if r.CancelReason != "" {
		s += " reason=" + r.CancelReason
	}
	if len(r.Events) > 0 {
		s += fmt.Sprintf(" events=%d", len(r.Events))
	}
	return s
}

// bigTxn writes n keys of size bytes each under prefix in one revision.
func (e *env) bigTxn(t testing.TB, prefix string, n, size int) {
	t.Helper()
	var ops []client.Op
	for i := range n {
		ops = append(ops, client.OpPut([]byte(fmt.Sprintf("%s%02d", prefix, i)), []byte(strings.Repeat("x", size))))
	}
	if _, err := e.kvd.Txn(t.Context(), client.Txn{Then: ops}); err != nil {
		t.Fatal(err)
	}
}

func TestWatchFragmentsLargeResponsesWhenAsked(t *testing.T) {
	const maxBytes, n = 2048, 10
	e := start(t, 1, etcdapi.Config{MaxRequestBytes: maxBytes})
	for _, fragment := range []bool{true, false} {
		t.Run(fmt.Sprint("fragment=", fragment), func(t *testing.T) {
			w := e.rawWatch(t)
			w.create(&pb.WatchCreateRequest{Key: []byte("frag/"), RangeEnd: []byte("frag0"), Fragment: fragment})
			w.recv() // created
			e.bigTxn(t, "frag/", n, 500)
			var got, msgs int
			for got < n {
				r := w.recv()
				msgs++
				got += len(r.Events)
				if last := got == n; r.Fragment == last {
					t.Errorf("response %d (%d events so far) fragment=%v", msgs, got, r.Fragment)
				}
				if fragment && len(r.Events) > 1 && protoSize(r) >= maxBytes {
					t.Errorf("fragment of %d bytes, limit %d", protoSize(r), maxBytes)
				}
			}
			if wantOne := !fragment; (msgs == 1) != wantOne {
				t.Errorf("%d responses for one revision of %d events, fragment %v", msgs, n, fragment)
			}
		})
	}
	// clientv3 joins the fragments into one response.
	wc := e.etcd.Watch(t.Context(), "frag2/", clientv3.WithPrefix(), clientv3.WithFragment())
	e.bigTxn(t, "frag2/", n, 500)
	if r := next(t, wc); len(r.Events) != n {
		t.Errorf("clientv3 got %d events in a response, want the %d joined", len(r.Events), n)
	}
}

func TestWatchOfSlowClientIsCancelledAtTheQueueBound(t *testing.T) {
	gate := make(chan struct{})
	e := start(t, 1, etcdapi.Config{WatchQueueBytes: 4096, Knobs: etcdapi.Knobs{WatchSendGate: gate}})
	w := e.rawWatch(t)
	w.create(&pb.WatchCreateRequest{Key: []byte("slow/"), RangeEnd: []byte("slow0")})
	gate <- struct{}{}
	if r := w.recv(); !r.Created {
		t.Fatalf("first response %q, want created", describe(r))
	}
	puts := 0
	for ; e.srv.WatchOverflows() == 0; puts++ {
		if puts == 500 {
			t.Fatalf("%d puts of 1000 bytes held back, and the 4096-byte queue never overflowed", puts)
		}
		e.put(t, fmt.Sprintf("slow/%03d", puts), strings.Repeat("x", 1000))
	}
	close(gate)
	var last int64
	for {
		r := w.recv()
		for _, ev := range r.Events {
			if ev.Kv.ModRevision <= last {
				t.Fatalf("event at %d after %d", ev.Kv.ModRevision, last)
			}
			last = ev.Kv.ModRevision
		}
		if r.Canceled {
			if !strings.Contains(r.CancelReason, "reads too slowly") || r.WatchId != 0 {
				t.Errorf("cancel %q, want watch 0 cancelled for reading too slowly", describe(r))
			}
			break
		}
	}
	select {
	case r, ok := <-w.resps:
		if ok {
			t.Errorf("response after the cancel: %q", describe(r))
		}
	case <-time.After(100 * time.Millisecond):
	}
}

func protoSize(r *pb.WatchResponse) int { return proto.Size(r) }
