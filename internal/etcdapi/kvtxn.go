package etcdapi

import (
	"context"
	"math"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/kvd-project/kvd/client"
)

// Txn runs etcd's transaction as one client.Txn. It is checked as etcd's
// server checks it first (checkTxn: the operation limit, empty keys, sort
// options; then kvd's client checks the duplicate keys, as etcd's
// checkIntervals does). A put with prev_kv, which kvd's transactions do
// not take, becomes a GET of the key followed by the PUT: the GET sees
// the branch's earlier writes, so it finds what etcd's prev_kv gives. A
// range at a revision reads it from the history, when the transaction is
// applied (buildRange).
func (k *kvService) Txn(ctx context.Context, r *pb.TxnRequest) (*pb.TxnResponse, error) {
	ctx = writeContext(ctx)
	if err := checkTxn(r, k.s.cfg.MaxTxnOps); err != nil {
		return nil, err
	}
	t, err := buildTxn(r)
	if err != nil {
		return nil, err
	}
	res, err := k.s.c.Txn(ctx, t)
	if err != nil {
		return nil, kvStatus(err)
	}
	return k.s.txnResponse(r, res, res.Revision), nil
}

// checkTxn is etcd's check of a transaction request: the longest of its
// compares and branches within maxOps, a nested transaction within what
// its parent's longest list leaves, no empty key, a known sort option,
// etcd's put option errors, no empty operation.
func checkTxn(r *pb.TxnRequest, maxOps int) error {
	n := max(len(r.Compare), len(r.Success), len(r.Failure))
	if n > maxOps {
		return rpctypes.ErrGRPCTooManyOps
	}
	for _, c := range r.Compare {
		if len(c.Key) == 0 {
			return rpctypes.ErrGRPCEmptyKey
		}
	}
	for _, ops := range [][]*pb.RequestOp{r.Success, r.Failure} {
		for _, op := range ops {
			if err := checkOp(op, maxOps-n); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkOp(op *pb.RequestOp, maxOps int) error {
	switch o := op.GetRequest().(type) {
	case *pb.RequestOp_RequestRange:
		return checkRange(o.RequestRange)
	case *pb.RequestOp_RequestPut:
		return checkPut(o.RequestPut)
	case *pb.RequestOp_RequestDeleteRange:
		if len(o.RequestDeleteRange.GetKey()) == 0 {
			return rpctypes.ErrGRPCEmptyKey
		}
		return nil
	case *pb.RequestOp_RequestTxn:
		return checkTxn(o.RequestTxn, maxOps)
	}
	return rpctypes.ErrGRPCKeyNotFound // an empty operation, as etcd answers it
}

// buildTxn is r in kvd's client's terms; r passed checkTxn.
func buildTxn(r *pb.TxnRequest) (client.Txn, error) {
	var t client.Txn
	for _, c := range r.Compare {
		cmp, err := buildCmp(c)
		if err != nil {
			return t, err
		}
		t.If = append(t.If, cmp)
	}
	var err error
	if t.Then, err = buildOps(r.Success); err == nil {
		t.Else, err = buildOps(r.Failure)
	}
	return t, err
}

// buildCmp maps one compare. As in etcd, an operand of another target
// than the compare's (a VERSION compare carrying a value) is zero.
func buildCmp(c *pb.Compare) (client.Cmp, error) {
	var op client.CmpOp
	switch c.Result {
	case pb.Compare_EQUAL:
		op = client.CmpEqual
	case pb.Compare_NOT_EQUAL:
		op = client.CmpNotEqual
	case pb.Compare_LESS:
		op = client.CmpLess
	case pb.Compare_GREATER:
		op = client.CmpGreater
	default:
		return client.Cmp{}, invalid("unknown compare result")
	}
	var num int64
	switch c.Target {
	case pb.Compare_VERSION:
		num = c.GetVersion()
	case pb.Compare_CREATE:
		num = c.GetCreateRevision()
	case pb.Compare_MOD:
		num = c.GetModRevision()
	case pb.Compare_LEASE:
		num = c.GetLease()
	}
	if num < 0 {
		// kvd's revisions, versions and lease ids are unsigned.
		return client.Cmp{}, invalid("negative number in compare")
	}
	var cmp client.Cmp
	switch c.Target {
	case pb.Compare_VERSION:
		cmp = client.CompareVersion(c.Key, op, uint64(num))
	case pb.Compare_CREATE:
		op, rev := cmpRev(op, num)
		cmp = client.CompareCreateRevision(c.Key, op, rev)
	case pb.Compare_MOD:
		op, rev := cmpRev(op, num)
		cmp = client.CompareModRevision(c.Key, op, rev)
	case pb.Compare_LEASE:
		cmp = client.CompareLease(c.Key, op, client.LeaseID(num))
	case pb.Compare_VALUE:
		cmp = client.CompareValue(c.Key, op, c.GetValue())
	default:
		return client.Cmp{}, invalid("unknown compare target")
	}
	if len(c.RangeEnd) > 0 {
		// etcd's "\x00" (every key from Key on) is the client's too.
		cmp = cmp.WithRange(c.RangeEnd)
	}
	return cmp, nil
}

// cmpRev is a compare of a key's create or mod revision against etcd
// revision num (0 <= num) in kvd's numbering (revision.go). 0 is an
// absent key's in both. etcd's 1 lies between an absent key's 0 and every
// live key's (2 or more), where kvd has no number: LESS 1 is "absent"
// (kvd's LESS 1), GREATER 1 "live" (kvd's GREATER 0), EQUAL 1 holds for
// no key and NOT_EQUAL 1 for every key (a comparison with a revision no
// store reaches).
func cmpRev(op client.CmpOp, num int64) (client.CmpOp, uint64) {
	if num != 1 {
		return op, kvdRev(num)
	}
	switch op {
	case client.CmpLess:
		return op, 1
	case client.CmpGreater:
		return op, 0
	}
	return op, math.MaxUint64
}

// buildOps maps a branch; a put with prev_kv takes two operations (a GET,
// then the PUT), which txnResponse folds back into one.
func buildOps(in []*pb.RequestOp) ([]client.Op, error) {
	var out []client.Op
	for _, op := range in {
		switch o := op.GetRequest().(type) {
		case *pb.RequestOp_RequestRange:
			op, err := buildRange(o.RequestRange)
			if err != nil {
				return nil, err
			}
			out = append(out, op)
		case *pb.RequestOp_RequestPut:
			out = append(out, buildPut(o.RequestPut)...)
		case *pb.RequestOp_RequestDeleteRange:
			r := o.RequestDeleteRange
			var opts []client.WriteOption
			if r.PrevKv {
				opts = append(opts, client.WithPrevKV())
			}
			out = append(out, client.OpDeleteRange(r.Key, rangeEnd(r.Key, r.RangeEnd), opts...))
		case *pb.RequestOp_RequestTxn:
			t, err := buildTxn(o.RequestTxn)
			if err != nil {
				return nil, err
			}
			out = append(out, client.OpTxn(t.If, t.Then, t.Else))
		}
	}
	return out, nil
}

// buildRange maps a range. One at a revision reads the state at that
// revision as committed before the transaction, as etcd's does (kvd's
// txn applies it so, on every member alike). etcd's revision 1 is the
// empty store, kvd's revision 0, which kvd's ranges take for "the
// latest": it is a range of no keys, whose answer no compaction changes.
func buildRange(r *pb.RangeRequest) (client.Op, error) {
	opts, err := readOptions(r)
	if err != nil {
		return client.Op{}, err
	}
	switch {
	case r.Revision == 1:
		return client.OpRange(r.Key, r.Key, opts...), nil
	case r.Revision > 1:
		opts = append(opts, client.WithRev(kvdRev(r.Revision)))
	}
	return client.OpRange(r.Key, rangeEnd(r.Key, r.RangeEnd), opts...), nil
}

func buildPut(r *pb.PutRequest) []client.Op {
	var opts []client.WriteOption
	if r.Lease != 0 {
		opts = append(opts, client.WithLease(client.LeaseID(r.Lease)))
	}
	if r.IgnoreValue {
		opts = append(opts, client.WithIgnoreValue())
	}
	if r.IgnoreLease {
		opts = append(opts, client.WithIgnoreLease())
	}
	put := client.OpPut(r.Key, r.Value, opts...)
	if r.PrevKv {
		return []client.Op{client.OpGet(r.Key), put}
	}
	return []client.Op{put}
}

// txnResponse maps res, the outcome of r, back to etcd's shape: the
// transaction's header (rev) on the whole, and inside it etcd's: a header
// of only the revision on each range, put and delete, an empty one on a
// nested transaction.
func (s *Server) txnResponse(r *pb.TxnRequest, res *client.TxnResponse, rev uint64) *pb.TxnResponse {
	out := s.opResponses(r, res, rev)
	out.Header = s.header(rev)
	return out
}

// opResponses is txnResponse without its header, for a transaction at
// any depth.
func (s *Server) opResponses(r *pb.TxnRequest, res *client.TxnResponse, rev uint64) *pb.TxnResponse {
	reqs := r.Success
	if !res.Succeeded {
		reqs = r.Failure
	}
	out := &pb.TxnResponse{Header: &pb.ResponseHeader{}, Succeeded: res.Succeeded, Responses: make([]*pb.ResponseOp, 0, len(reqs))}
	opHeader := func() *pb.ResponseHeader { return &pb.ResponseHeader{Revision: etcdRev(rev)} }
	j := 0 // res.Results' index: a put with prev_kv has two
	for _, op := range reqs {
		if j >= len(res.Results) || j+1 >= len(res.Results) && op.GetRequestPut().GetPrevKv() {
			break // not what was asked: client.Txn checks its top level's count only
		}
		var resp pb.ResponseOp
		switch o := op.GetRequest().(type) {
		case *pb.RequestOp_RequestRange:
			rr := &res.Results[j]
			resp.Response = &pb.ResponseOp_ResponseRange{ResponseRange: &pb.RangeResponse{
				Header: opHeader(), Kvs: kvsOf(rr.KVs), More: rr.More, Count: int64(rr.Count)}}
		case *pb.RequestOp_RequestPut:
			put := &pb.PutResponse{Header: opHeader()}
			if o.RequestPut.PrevKv {
				if prev := prevOf(o.RequestPut.Key, &res.Results[j]); prev != nil {
					put.PrevKv = kvOf(*prev)
				}
				j++
			}
			resp.Response = &pb.ResponseOp_ResponsePut{ResponsePut: put}
		case *pb.RequestOp_RequestDeleteRange:
			rr := &res.Results[j]
			resp.Response = &pb.ResponseOp_ResponseDeleteRange{ResponseDeleteRange: &pb.DeleteRangeResponse{
				Header: opHeader(), Deleted: rr.Deleted, PrevKvs: kvsOf(rr.KVs)}}
		case *pb.RequestOp_RequestTxn:
			nested := res.Results[j].Txn
			if nested == nil {
				nested = &client.TxnResponse{}
			}
			resp.Response = &pb.ResponseOp_ResponseTxn{ResponseTxn: s.opResponses(o.RequestTxn, nested, rev)}
		}
		out.Responses = append(out.Responses, &resp)
		j++
	}
	return out
}
