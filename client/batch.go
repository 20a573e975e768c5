package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/kvd-project/kvd/internal/txn"
	"github.com/kvd-project/kvd/internal/wire"
)

// MaxBatchPuts and MaxBatchBytes bound a PutBatch (the server enforces the
// same): at most MaxBatchPuts PUTs, encoded in at most MaxBatchBytes.
const (
	MaxBatchPuts  = txn.MaxBatchPuts
	MaxBatchBytes = txn.MaxBatchBytes
)

// BatchPut is one PUT of a PutBatch, with PutRevision's options: a lease
// (WithLease), ignore_value and ignore_lease (WithIgnoreValue,
// WithIgnoreLease).
type BatchPut struct {
	Key, Value  []byte
	Lease       LeaseID
	IgnoreValue bool
	IgnoreLease bool
}

// BatchResult is one PUT's outcome in a PutBatch: the revision it wrote
// at, or the error it would have had alone (ErrLeaseNotFound,
// ErrNotFound for ignore_value of a missing key, ErrNoSpace...), in which
// case it applied nothing.
type BatchResult struct {
	Revision uint64
	Err      error
}

// errNoPutBatch: the node does not announce wire.FeaturePutBatch (it
// predates it, and would close the connection on it). Not sent.
var errNoPutBatch = errors.New("the node does not serve put batches")

// PutBatch commits puts in one request and one Raft entry, applied as if
// each were a PutRevision of its own proposed right after the one before:
// one after the other, in order, each at its own revision and with its
// own outcome in results (results[i] is puts[i]'s). A PUT refused when it
// is applied fails alone. err is the batch's own failure (then no PUT has
// a result): a bad batch (ErrBadRequest: over MaxBatchPuts or
// MaxBatchBytes, or holding an invalid PUT), or a failure to commit it,
// which, as for a Put, may leave every PUT applied or none (ErrUnavailable
// without ErrNotApplied). Against servers that predate batches it sends
// the PUTs one by one, in order.
func (c *Client) PutBatch(ctx context.Context, puts []BatchPut) (results []BatchResult, err error) {
	ops := make([]txn.Op, len(puts))
	for i, p := range puts {
		ops[i] = txn.Op{Type: txn.Put, Key: p.Key, Value: p.Value, Lease: uint64(p.Lease), IgnoreValue: p.IgnoreValue, IgnoreLease: p.IgnoreLease}
	}
	if err := txn.ValidateBatch(ops); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	req := &wire.Request{Op: wire.OpPutBatch, Value: txn.AppendBatch(make([]byte, 0, txn.BatchLen(ops)), ops)}
	resp, err := c.leaderCall(ctx, req, false)
	if errors.Is(err, errNoPutBatch) {
		return c.putEach(ctx, puts), nil
	}
	if err != nil {
		return nil, err
	}
	rs, err := wire.DecodeBatchResults(resp.Value)
	if err == nil && len(rs) != len(puts) {
		err = fmt.Errorf("%d results for %d PUTs", len(rs), len(puts))
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errMalformedReply, err)
	}
	results = make([]BatchResult, len(rs))
	for i, r := range rs {
		if r.Status != wire.StatusOK {
			results[i].Err = statusError(&wire.Response{Op: wire.OpPutBatch, Status: r.Status, Value: []byte(r.Message)})
			continue
		}
		results[i].Revision = r.Revision
	}
	return results, nil
}

// putEach sends puts one by one, in order: PutBatch against servers that
// predate batches.
func (c *Client) putEach(ctx context.Context, puts []BatchPut) []BatchResult {
	results := make([]BatchResult, len(puts))
	for i, p := range puts {
		var opts []WriteOption
		if p.Lease != 0 {
			opts = append(opts, WithLease(p.Lease))
		}
		if p.IgnoreValue {
			opts = append(opts, WithIgnoreValue())
		}
		if p.IgnoreLease {
			opts = append(opts, WithIgnoreLease())
		}
		results[i].Revision, results[i].Err = c.PutRevision(ctx, p.Key, p.Value, opts...)
	}
	return results
}
