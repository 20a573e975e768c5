package errs

import (
	"errors"
	"fmt"
	"testing"

	"github.com/kvd-project/kvd/internal/wire"
)

// TestEveryStatusRoundTrips: every status but OK and Internal has a row,
// and its sentinel goes error → status → error with errors.Is holding,
// bare, wrapped with detail, and (for a class) as a Classed error.
func TestEveryStatusRoundTrips(t *testing.T) {
	byStatus := map[wire.Status]row{}
	for _, r := range rows {
		if _, dup := byStatus[r.status]; dup {
			t.Errorf("status %d has two rows", r.status)
		}
		byStatus[r.status] = r
	}
	for s := wire.StatusOK + 1; s <= wire.StatusLeaseExists; s++ {
		r, ok := byStatus[s]
		if s == wire.StatusInternal {
			if ok {
				t.Errorf("StatusInternal has a row")
			}
			continue
		}
		if !ok {
			t.Errorf("status %d has no row", s)
			continue
		}
		m := r.match
		if m == nil {
			m = r.err
		}
		for _, err := range []error{
			m,
			fmt.Errorf("%w: some detail", m),
			fmt.Errorf("context: %w", Classed(m, "layer: its own words")),
		} {
			resp := Encode(err)
			if resp.Status != s {
				t.Errorf("Encode(%v) = status %d, want %d", err, resp.Status, s)
			}
			back := Decode(&resp)
			if !errors.Is(back, m) || !errors.Is(back, r.err) {
				t.Errorf("status %d: Decode(Encode(%v)) = %v, not %v", s, err, back, m)
			}
		}
	}
}

func TestEncodeDecode(t *testing.T) {
	cause := errors.New("write /data/x: no space left on device")
	for _, tc := range []struct {
		err  error
		want wire.Response
		msg  string // Decode's message
	}{
		{nil, wire.Response{}, ""},
		{errors.New("raft: request timed out"), wire.Response{Status: wire.StatusUnavailable, Value: []byte("raft: request timed out")},
			"kvd: unavailable: raft: request timed out"},
		{fmt.Errorf("%w: 7", ErrLeaseNotFound), wire.Response{Status: wire.StatusLeaseNotFound, Value: []byte("7")},
			"kvd: lease not found: 7"},
		{ErrLeaseNotFound, wire.Response{Status: wire.StatusLeaseNotFound, Value: []byte("")}, "kvd: lease not found"},
		{fmt.Errorf("%w: 5 bytes", ErrValueTooLarge), wire.Response{Status: wire.StatusValueTooLarge}, "kvd: value too large"},
		{fmt.Errorf("put: %w", &storageErr{cause}), wire.Response{Status: wire.StatusStorage, Value: []byte(cause.Error())},
			"kvd: storage: " + cause.Error()},
		{&NotLeaderError{LeaderID: 3, LeaderAddr: "n3:7000"}, wire.Response{Status: wire.StatusNotLeader, Version: 3, Value: []byte("n3:7000")},
			"kvd: not leader (leader is 3 at n3:7000)"},
		{ErrNotLeader, wire.Response{Status: wire.StatusNotLeader}, "kvd: not leader (leader unknown)"},
		{Classed(ErrNotApplied, "raft: proposal dropped"), wire.Response{Status: wire.StatusRetry, Value: []byte("raft: proposal dropped")},
			"kvd: unavailable: request refused before it was proposed: kvd: not applied: raft: proposal dropped"},
		{Classed(ErrBadRequest, "raft: no such member"), wire.Response{Status: wire.StatusBadRequest, Value: []byte("raft: no such member")},
			"kvd: bad request: raft: no such member"},
	} {
		got := Encode(tc.err)
		if got.Status != tc.want.Status || got.Version != tc.want.Version || string(got.Value) != string(tc.want.Value) {
			t.Errorf("Encode(%v) = %+v, want %+v", tc.err, got, tc.want)
		}
		back := Decode(&got)
		if (back == nil) != (tc.msg == "") || back != nil && back.Error() != tc.msg {
			t.Errorf("Decode(Encode(%v)) = %v, want %q", tc.err, back, tc.msg)
		}
	}
	internal := wire.Response{Status: wire.StatusInternal, Value: []byte("json: boom")}
	if err := Decode(&internal); err == nil || err.Error() != "kvd: server error (status 8): json: boom" {
		t.Errorf("Decode(StatusInternal) = %v", err)
	}
}

// storageErr stands for raft.StorageError: a Causer matching ErrStorage.
type storageErr struct{ err error }

func (e *storageErr) Error() string        { return "raft: storage: " + e.err.Error() }
func (e *storageErr) Is(target error) bool { return target == ErrStorage }
func (e *storageErr) Cause() error         { return e.err }

func TestClassed(t *testing.T) {
	e := Classed(ErrBadRequest, "raft: member already exists")
	w := fmt.Errorf("%w: 3", e)
	if !errors.Is(w, e) || !errors.Is(w, ErrBadRequest) || errors.Is(w, ErrNotFound) || e.Error() != "raft: member already exists" {
		t.Fatalf("Classed: %v", w)
	}
	if errors.Is(Classed(ErrBadRequest, "x"), Classed(ErrBadRequest, "x")) {
		t.Fatal("two Classed errors with the same words are the same error")
	}
}
