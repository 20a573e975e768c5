package etcdapi

import (
	"context"
	"errors"
	"math"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/limits"
	"github.com/kvd-project/kvd/internal/txn"
)

// kvService implements etcd's KV service.
type kvService struct {
	pb.UnimplementedKVServer
	s *Server
}

// Range reads a key or a range (etcd's Range) through client.Range. The
// header revision is the store's as the range was read, a past one's too
// (the node serving the scan tells it beside the revision read), as
// etcd's.
func (k *kvService) Range(ctx context.Context, r *pb.RangeRequest) (*pb.RangeResponse, error) {
	resp, err := k.s.rangeKV(ctx, r)
	if err != nil {
		return nil, kvStatus(err)
	}
	return resp, nil
}

// rangeKV is Range's answer, or its error as kvd's client gives it (or a
// status for a request etcd itself refuses).
func (s *Server) rangeKV(ctx context.Context, r *pb.RangeRequest) (*pb.RangeResponse, error) {
	if err := checkRange(r); err != nil {
		return nil, err
	}
	opts, err := readOptions(r)
	if err != nil {
		return nil, err
	}
	level := client.Linearizable
	if r.Serializable {
		level = client.Serializable
	}
	if resp := s.getOne(ctx, r, level); resp != nil {
		return resp, nil
	}
	opts = append(opts, client.WithConsistency(level))
	switch {
	case r.Revision == 1:
		return s.rangeEmptyStore(ctx, level)
	case r.Revision > 1:
		opts = append(opts, client.WithRev(kvdRev(r.Revision)))
	}
	res, err := s.c.Range(ctx, r.Key, rangeEnd(r.Key, r.RangeEnd), opts...)
	if err != nil {
		return nil, err
	}
	return &pb.RangeResponse{Header: s.header(res.CurrentRevision), Kvs: kvsOf(res.KVs), More: res.More, Count: int64(res.Count)}, nil
}

// rangeEmptyStore answers a Range at etcd revision 1: kvd's empty store
// (revision 0, which kvd's reads take for "the latest"), so no keys, at
// the store's current revision, as etcd answers; ErrCompacted if the
// history is compacted past it, which a read at kvd revision 1 finds for
// a compaction at 2 or later (one at exactly 1 leaves that read answered,
// and so this one: the empty store's answer is the same either way).
func (s *Server) rangeEmptyStore(ctx context.Context, level client.Consistency) (*pb.RangeResponse, error) {
	probe := func(opts ...client.ReadOption) (*client.RangeResponse, error) {
		return s.c.Range(ctx, []byte{0}, []byte{0, 0}, append(opts, client.WithCountOnly(), client.WithConsistency(level))...)
	}
	cur, err := probe()
	if err != nil {
		return nil, err
	}
	if cur.Revision > 0 {
		if _, err := probe(client.WithRev(1)); err != nil {
			return nil, err
		}
	}
	return &pb.RangeResponse{Header: s.header(cur.Revision)}, nil
}

// getOne answers a Range of one key at the latest revision with a GET
// (Config.OneSidedGets), which kvd's client serves one-sided when it can
// (no RPC: RDMA READs of the node's region), if the GET finds the key and
// knows a revision its answer is at; else (nil) the Range reads it as any
// other range. Sorts and limits do not change a one-key answer; filters
// and counts only do not take this path.
func (s *Server) getOne(ctx context.Context, r *pb.RangeRequest, level client.Consistency) *pb.RangeResponse {
	if !s.cfg.OneSidedGets || len(r.RangeEnd) != 0 || r.Revision > 0 || r.CountOnly || r.MinModRevision != 0 || r.MaxModRevision != 0 ||
		r.MinCreateRevision != 0 || r.MaxCreateRevision != 0 {
		return nil
	}
	v, m, rev, err := s.c.GetMeta(ctx, r.Key, client.WithConsistency(level))
	if err != nil || rev == 0 {
		return nil
	}
	kv := client.KV{Key: r.Key, Meta: m}
	if !r.KeysOnly {
		kv.Value = v
	}
	return &pb.RangeResponse{Header: s.header(rev), Kvs: []*mvccpb.KeyValue{kvOf(kv)}, Count: 1}
}

// checkRange refuses what etcd's server refuses before reading.
func checkRange(r *pb.RangeRequest) error {
	if len(r.Key) == 0 {
		return rpctypes.ErrGRPCEmptyKey
	}
	if _, ok := pb.RangeRequest_SortOrder_name[int32(r.SortOrder)]; !ok {
		return rpctypes.ErrGRPCInvalidSortOption
	}
	if _, ok := pb.RangeRequest_SortTarget_name[int32(r.SortTarget)]; !ok {
		return rpctypes.ErrGRPCInvalidSortOption
	}
	return nil
}

// readOptions are r's shaping options (not its revision nor its
// consistency, which a Range inside a Txn cannot take). etcd's sort
// numbering is the client's (client.SortTarget, client.SortOrder), and
// so is its defaulting (SortNone ascends on a target other than the
// key). kvd's revisions are unsigned: a negative revision bound, which
// etcd takes as a filter nothing or everything passes, is refused. The
// bounds are etcd revisions (revision.go): a maximum of 1, below every
// key's, is kvd's 0, "no bound", so it becomes a minimum no key reaches.
func readOptions(r *pb.RangeRequest) ([]client.ReadOption, error) {
	if r.MinModRevision < 0 || r.MaxModRevision < 0 || r.MinCreateRevision < 0 || r.MaxCreateRevision < 0 {
		return nil, invalid("negative revision bound")
	}
	opts := []client.ReadOption{
		client.WithSort(client.SortTarget(r.SortTarget), client.SortOrder(r.SortOrder)),
		client.WithMinModRev(kvdRev(r.MinModRevision)), client.WithMaxModRev(kvdRev(r.MaxModRevision)),
		client.WithMinCreateRev(kvdRev(r.MinCreateRevision)), client.WithMaxCreateRev(kvdRev(r.MaxCreateRevision)),
	}
	if r.MaxModRevision == 1 || r.MaxCreateRevision == 1 {
		opts = append(opts, client.WithMinModRev(math.MaxUint64))
	}
	if r.Limit > 0 {
		opts = append(opts, client.WithLimit(int(min(r.Limit, int64(math.MaxInt)))))
	}
	if r.KeysOnly {
		opts = append(opts, client.WithKeysOnly())
	}
	if r.CountOnly {
		opts = append(opts, client.WithCountOnly())
	}
	return opts, nil
}

// rangeEnd is etcd's range_end for key as kvd's client takes an end:
// etcd's empty end (key alone) is the smallest key after key; its "\x00"
// (every key from key on) is no end.
func rangeEnd(key, end []byte) []byte {
	switch {
	case len(end) == 0:
		return singleEnd(key)
	case len(end) == 1 && end[0] == 0:
		return nil
	}
	return end
}

// singleEnd is the end of the range that holds key alone: key+"\x00",
// except for a key of the longest length, where no longer key can exist
// and the prefix end (within the length limit) holds key alone too.
func singleEnd(key []byte) []byte {
	if len(key) >= limits.MaxKey {
		return client.PrefixEnd(key)
	}
	return append(append(make([]byte, 0, len(key)+1), key...), 0)
}

// Put writes a key (etcd's Put): a plain Put (no prev_kv, lease or
// ignore option) through the Server's put group, committed in a batch
// with the Puts that arrive while one is committed, at a revision of its
// own (internal/putgroup's Revisions); else client.PutRevision, or
// client.PutPrev for prev_kv, or a transaction reading the key before it
// writes it for prev_kv with a lease (PutPrev takes no lease).
func (k *kvService) Put(ctx context.Context, r *pb.PutRequest) (*pb.PutResponse, error) {
	ctx = writeContext(ctx)
	if err := checkPut(r); err != nil {
		return nil, err
	}
	var opts []client.WriteOption
	if r.IgnoreValue {
		opts = append(opts, client.WithIgnoreValue())
	}
	if r.IgnoreLease {
		opts = append(opts, client.WithIgnoreLease())
	}
	var (
		prev *client.KV
		rev  uint64
		err  error
	)
	switch {
	case !r.PrevKv && r.Lease == 0 && len(opts) == 0:
		rev, err = k.s.puts.Put(ctx, r.Key, r.Value)
	case r.PrevKv && r.Lease != 0:
		prev, rev, err = k.putPrevLease(ctx, r, opts)
	case r.PrevKv:
		prev, rev, err = k.s.c.PutPrev(ctx, r.Key, r.Value, opts...)
	default:
		if r.Lease != 0 {
			opts = append(opts, client.WithLease(client.LeaseID(r.Lease)))
		}
		rev, err = k.s.c.PutRevision(ctx, r.Key, r.Value, opts...)
	}
	if err != nil {
		return nil, kvStatus(err)
	}
	resp := &pb.PutResponse{Header: k.s.header(rev)}
	if prev != nil {
		resp.PrevKv = kvOf(*prev)
	}
	return resp, nil
}

// putPrevLease is a PUT with a lease that returns the key's previous
// state: one transaction that reads the key, then writes it.
func (k *kvService) putPrevLease(ctx context.Context, r *pb.PutRequest, opts []client.WriteOption) (*client.KV, uint64, error) {
	opts = append(opts, client.WithLease(client.LeaseID(r.Lease)))
	t, err := k.s.c.Txn(ctx, client.Txn{Then: []client.Op{client.OpGet(r.Key), client.OpPut(r.Key, r.Value, opts...)}})
	if err != nil {
		return nil, 0, err
	}
	return prevOf(r.Key, &t.Results[0]), t.Revision, nil
}

// prevOf is the key a transaction's GET found, or nil.
func prevOf(key []byte, res *client.OpResult) *client.KV {
	if !res.Found {
		return nil
	}
	return &client.KV{Key: key, Value: res.Value, Meta: res.Meta}
}

// checkPut refuses what etcd's server refuses before writing.
func checkPut(r *pb.PutRequest) error {
	switch {
	case len(r.Key) == 0:
		return rpctypes.ErrGRPCEmptyKey
	case r.IgnoreValue && len(r.Value) != 0:
		return rpctypes.ErrGRPCValueProvided
	case r.IgnoreLease && r.Lease != 0:
		return rpctypes.ErrGRPCLeaseProvided
	}
	return nil
}

// DeleteRange deletes a key or a range (etcd's DeleteRange) in one
// client.DeleteRange.
func (k *kvService) DeleteRange(ctx context.Context, r *pb.DeleteRangeRequest) (*pb.DeleteRangeResponse, error) {
	ctx = writeContext(ctx)
	if len(r.Key) == 0 {
		return nil, rpctypes.ErrGRPCEmptyKey
	}
	var opts []client.WriteOption
	if r.PrevKv {
		opts = append(opts, client.WithPrevKV())
	}
	res, err := k.s.c.DeleteRange(ctx, r.Key, rangeEnd(r.Key, r.RangeEnd), opts...)
	if err != nil {
		return nil, kvStatus(err)
	}
	return &pb.DeleteRangeResponse{Header: k.s.header(res.Revision), Deleted: res.Deleted, PrevKvs: kvsOf(res.PrevKVs)}, nil
}

// Compact compacts the history (client.CompactRevision). kvd applies a
// compaction in two halves (internal/store): the logical one, replicated,
// after which reads and watches below the revision fail on every member,
// is done when the call returns; the physical deletion of the old records
// then runs in the background on each member. physical (wait for the
// deletion) is accepted and answered as soon as the logical half is done:
// no read can tell the difference, and only disk space waits.
func (k *kvService) Compact(ctx context.Context, r *pb.CompactionRequest) (*pb.CompactionResponse, error) {
	ctx = writeContext(ctx)
	if r.Revision <= 1 {
		// etcd's revision 1 is kvd's empty store (revision.go), its
		// compaction revision before any compaction: nothing can be
		// compacted to it again.
		return nil, rpctypes.ErrGRPCCompacted
	}
	rev, err := k.s.c.CompactRevision(ctx, kvdRev(r.Revision))
	if err != nil {
		return nil, kvStatus(err)
	}
	return &pb.CompactionResponse{Header: k.s.header(rev)}, nil
}

// kvStatus is toStatus with the KV service's own mappings first: a put
// option on a missing key, and the transaction checks kvd's client makes
// as etcd's server does.
func kvStatus(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, client.ErrNotFound):
		return rpctypes.ErrGRPCKeyNotFound
	case errors.Is(err, txn.ErrDuplicateKey):
		return rpctypes.ErrGRPCDuplicateKey
	case errors.Is(err, txn.ErrValueProvided):
		return rpctypes.ErrGRPCValueProvided
	case errors.Is(err, txn.ErrLeaseProvided):
		return rpctypes.ErrGRPCLeaseProvided
	case errors.Is(err, txn.ErrTooLarge):
		// Within MaxRequestBytes but past what kvd's transactions hold
		// (limits.MaxTxnBytes): the same refusal as a larger request.
		return rpctypes.ErrGRPCRequestTooLarge
	}
	st := toStatus(err)
	if s, _ := status.FromError(st); s.Code() == codes.Unknown && errors.Is(err, client.ErrBadRequest) {
		// A bound of kvd's that etcd does not have (docs/limits.md).
		return status.Error(codes.InvalidArgument, "etcdserver: "+err.Error())
	}
	return st
}

func kvOf(kv client.KV) *mvccpb.KeyValue {
	return &mvccpb.KeyValue{Key: kv.Key, Value: kv.Value, CreateRevision: keyRev(kv.CreateRevision),
		ModRevision: keyRev(kv.ModRevision), Version: int64(kv.Version), Lease: int64(kv.Lease)}
}

func kvsOf(in []client.KV) []*mvccpb.KeyValue {
	if len(in) == 0 {
		return nil
	}
	out := make([]*mvccpb.KeyValue, len(in))
	for i, kv := range in {
		out[i] = kvOf(kv)
	}
	return out
}
