package errs

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kvd-project/kvd/internal/wire"
)

// row is one line of the table: a status and the sentinel it stands for.
type row struct {
	status wire.Status
	// err is what Decode returns for status (wrapped with the response's
	// text, if text); Encode picks the first row whose match (err if nil)
	// errors.Is finds in the error.
	err   error
	match error
	// text: the response's Value carries a message (Encode fills it,
	// Decode appends it).
	text bool
}

// errRetry is StatusRetry decoded: the request was not applied, and the
// client may try it again.
var errRetry = fmt.Errorf("%w: request refused before it was proposed: %w", ErrUnavailable, ErrNotApplied)

// rows is the table, in Encode's order of preference. StatusOK (nil) and
// StatusInternal (a server fault with no sentinel) are not in it.
var rows = []row{
	{status: wire.StatusNotLeader, err: ErrNotLeader}, // Version, Value: the leader (see Redirect)
	{status: wire.StatusNoSpace, err: ErrNoSpace},
	{status: wire.StatusKeyTooLarge, err: ErrKeyTooLarge},
	{status: wire.StatusValueTooLarge, err: ErrValueTooLarge},
	{status: wire.StatusEmptyKey, err: ErrEmptyKey},
	{status: wire.StatusRetry, err: errRetry, match: ErrNotApplied, text: true},
	{status: wire.StatusLeaseExists, err: ErrLeaseExists, text: true}, // before BadRequest, its class
	{status: wire.StatusBadRequest, err: ErrBadRequest, text: true},
	{status: wire.StatusLeaseNotFound, err: ErrLeaseNotFound, text: true},
	{status: wire.StatusStorage, err: ErrStorage, text: true}, // Value: the cause alone (see Causer)
	{status: wire.StatusPermissionDenied, err: ErrPermissionDenied, text: true},
	{status: wire.StatusCompacted, err: ErrCompacted, text: true}, // the server's watch sets Version itself
	{status: wire.StatusFutureRevision, err: ErrFutureRevision, text: true},
	{status: wire.StatusNotFound, err: ErrNotFound},
	{status: wire.StatusUnavailable, err: ErrUnavailable, text: true}, // also every error not above
}

// Redirect is implemented by errors that name the leader to ask instead
// (raft.NotLeaderError, NotLeaderError); Encode puts it in the response.
type Redirect interface {
	Leader() (id uint64, addr string)
}

// Causer is implemented by errors whose wire text is their cause alone
// (raft.StorageError): the client says which sentinel it is itself.
type Causer interface {
	Cause() error
}

// Encode is err as a response: StatusOK for nil, the status of the first
// row err matches, else StatusUnavailable (the outcome of a failed write
// is then unknown to the client).
func Encode(err error) wire.Response {
	if err == nil {
		return wire.Response{}
	}
	r := rows[len(rows)-1]
	for _, rw := range rows {
		m := rw.match
		if m == nil {
			m = rw.err
		}
		if errors.Is(err, m) {
			r = rw
			break
		}
	}
	resp := wire.Response{Status: r.status}
	var rd Redirect
	if r.status == wire.StatusNotLeader && errors.As(err, &rd) {
		id, addr := rd.Leader()
		resp.Version, resp.Value = id, []byte(addr)
	}
	if r.text {
		resp.Value = []byte(text(err, r.err))
	}
	return resp
}

// text is err's message for the wire: its cause if it has one, and
// without the sentinel's own words, which the client puts back (a
// "kvd: lease not found: 7" is sent as "7").
func text(err, sentinel error) string {
	var c Causer
	if errors.As(err, &c) {
		return c.Cause().Error()
	}
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, sentinel.Error()); ok && (rest == "" || strings.HasPrefix(rest, ": ")) {
		return strings.TrimPrefix(rest, ": ")
	}
	return msg
}

// Decode is the error a response stands for: nil for StatusOK, the row's
// sentinel (with the response's message, if it has one) for the others.
func Decode(r *wire.Response) error {
	switch r.Status {
	case wire.StatusOK:
		return nil
	case wire.StatusNotLeader:
		return &NotLeaderError{LeaderID: r.Version, LeaderAddr: string(r.Value)}
	}
	for _, rw := range rows {
		switch {
		case rw.status != r.Status:
		case rw.text && len(r.Value) > 0:
			return fmt.Errorf("%w: %s", rw.err, r.Value)
		default:
			return rw.err
		}
	}
	return fmt.Errorf("kvd: server error (status %d): %s", r.Status, r.Value)
}

// NotLeaderError says which node leads, when the asked node knows
// (StatusNotLeader decoded; package client exports it).
type NotLeaderError struct {
	LeaderID   uint64
	LeaderAddr string
}

func (e *NotLeaderError) Error() string {
	if e.LeaderAddr == "" {
		return "kvd: not leader (leader unknown)"
	}
	return fmt.Sprintf("kvd: not leader (leader is %d at %s)", e.LeaderID, e.LeaderAddr)
}

// Is makes errors.Is(err, ErrNotLeader) hold.
func (e *NotLeaderError) Is(target error) bool { return target == ErrNotLeader }

// Leader makes it a Redirect.
func (e *NotLeaderError) Leader() (uint64, string) { return e.LeaderID, e.LeaderAddr }
