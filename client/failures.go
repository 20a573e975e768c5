package client

import (
	"context"
	"errors"
	"strings"
	"syscall"

	"github.com/kvd-project/kvd/internal/errs"
	"github.com/kvd-project/kvd/transport"
)

// failures collects why a request's attempts failed, one cause per node, so
// that the error it ends with names each node and its cause once (the
// wrapping of each layer a cause passed through left out).
type failures struct {
	order []string
	by    map[string]error
	last  error
}

// add records err as addr's cause. A context's error does not replace an
// earlier cause: that the call ran out of time says less than why the node
// could not serve it before.
func (f *failures) add(addr string, err error) {
	if f.by == nil {
		f.by = map[string]error{}
	}
	f.last = err
	if _, ok := f.by[addr]; !ok {
		f.order = append(f.order, addr)
	} else if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return
	}
	f.by[addr] = err
}

// allRefused reports whether every one of addrs refused in a way that
// waiting cannot change within a request (see refused): the request then
// fails at once instead of retrying until its deadline.
func (f *failures) allRefused(addrs []string) bool {
	for _, a := range addrs {
		if err, ok := f.by[a]; !ok || !refused(err) {
			return false
		}
	}
	return len(addrs) > 0
}

// refused reports whether err says its node cannot serve this client for
// now: nothing listens at the address, something other than kvd does, a
// node of another cluster, or a node that refused the hello itself (its
// peer address, which serves no clients).
func refused(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, errs.ErrNotEndpoint) ||
		errors.Is(err, ErrClusterMismatch) || errors.Is(err, errHelloRefused)
}

// noLeader reports whether err is a node's answer that it knows no leader.
func noLeader(err error) bool {
	var nl *NotLeaderError
	return errors.As(err, &nl) && nl.LeaderAddr == "" && nl.LeaderID == 0
}

// err is the request's failure: ErrUnavailable, with ctxErr (nil when it
// gave up before its deadline) and the collected causes. extra are wrapped
// too (ErrNotApplied for a write that provably was not applied).
func (f *failures) err(ctxErr error, extra ...error) *unavailableError {
	e := &unavailableError{ctxErr: ctxErr, wrapped: append([]error{ErrUnavailable}, extra...)}
	for _, a := range f.order {
		c := f.by[a]
		if noLeader(c) {
			e.noLeader = true
		}
		e.causes = append(e.causes, describe(a, c))
	}
	if e.noLeader {
		e.wrapped = append(e.wrapped, ErrNoLeader)
	}
	if ctxErr != nil {
		e.wrapped = append(e.wrapped, ctxErr)
	}
	if f.last != nil {
		e.wrapped = append(e.wrapped, f.last)
	}
	return e
}

// unavailableError is a request that no node could serve.
type unavailableError struct {
	noLeader bool
	write    bool // a write: say whether it was applied
	ctxErr   error
	causes   []string
	wrapped  []error
}

func (e *unavailableError) Error() string {
	var b strings.Builder
	b.WriteString(ErrUnavailable.Error())
	if e.noLeader {
		b.WriteString(": no leader (an election is under way, or too few members are up for one)")
	}
	if e.ctxErr != nil {
		b.WriteString(": " + e.ctxErr.Error())
	}
	if len(e.causes) > 0 {
		b.WriteString(": " + strings.Join(e.causes, "; "))
	}
	if e.write && errors.Is(e, ErrNotApplied) {
		b.WriteString(" (the write was not applied)")
	}
	return b.String()
}

func (e *unavailableError) Unwrap() []error { return e.wrapped }

// describe is err, from addr, in a few words: its cause, not the layers it
// was wrapped in on the way.
func describe(addr string, err error) string {
	var cm *ClusterMismatchError
	switch {
	case errors.As(err, &cm):
		return strings.TrimPrefix(cm.Error(), "kvd: ")
	case errors.Is(err, syscall.ECONNREFUSED):
		return addr + ": connection refused"
	case noLeader(err):
		return addr + ": knows no leader"
	case errors.Is(err, errs.ErrNotEndpoint):
		msg := err.Error()
		msg = msg[strings.Index(msg, errs.ErrNotEndpoint.Error())+len(errs.ErrNotEndpoint.Error()):]
		msg = strings.TrimSuffix(msg, ": "+transport.ErrProtocol.Error())
		msg = strings.TrimSuffix(msg, ": "+context.DeadlineExceeded.Error())
		return addr + " is not a kvd endpoint" + withoutNode(msg, addr)
	}
	return addr + ": " + withoutNode(err.Error(), addr)
}

// withoutNode drops from msg the wrapping that says which node and that it
// was unavailable or not sent: describe says those once.
func withoutNode(msg, addr string) string {
	for _, s := range []string{
		" [node " + addr + "]", "request not sent: ", ErrNotApplied.Error() + ": ", ErrUnavailable.Error() + ": ",
		"hello to " + addr + ": ", "tcp: dial " + addr + ": ", "dial tcp " + addr + ": ", "dial " + addr + ": ",
		"tcp: handshake with " + addr + ": ", addr + ": ",
	} {
		msg = strings.ReplaceAll(msg, s, "")
	}
	return msg
}
