package etcdapi

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"

	"github.com/kvd-project/kvd/client"
)

// RangeStream's bounds: it reads a range in key order rangeStreamPageKeys
// keys at a time, and sends at most rangeStreamChunkBytes of keys and
// values in one message (always at least one key).
const (
	rangeStreamPageKeys   = 256
	rangeStreamChunkBytes = 1 << 20
)

// RangeStream answers a Range in messages (etcd 3.7): the keys in order
// across them, the header, count and more on the last, so that merging
// them gives Range's answer. A range in key order is read a page at a
// time, every page after the first at the first's revision (one snapshot,
// as Range's own pages; a compaction past it meanwhile fails the stream
// with ErrCompacted), so the Server holds one page, not the whole range.
// A sorted range is read whole, as Range reads it, and sent in chunks.
func (k *kvService) RangeStream(r *pb.RangeRequest, stream grpc.ServerStreamingServer[pb.RangeStreamResponse]) error {
	if err := checkRange(r); err != nil {
		return err
	}
	if !keyOrder(r) || r.CountOnly || r.Revision == 1 {
		resp, err := k.s.rangeKV(stream.Context(), r)
		if err != nil {
			return kvStatus(err)
		}
		return sendChunks(stream, resp)
	}
	return kvStatus(k.s.rangePages(stream.Context(), r, stream))
}

// keyOrder reports whether r asks for its keys in ascending key order.
func keyOrder(r *pb.RangeRequest) bool {
	return r.SortTarget == pb.RangeRequest_KEY && (r.SortOrder == pb.RangeRequest_NONE || r.SortOrder == pb.RangeRequest_ASCEND)
}

// rangePages streams r page by page; r passed checkRange and is in key
// order.
func (s *Server) rangePages(ctx context.Context, r *pb.RangeRequest, stream grpc.ServerStreamingServer[pb.RangeStreamResponse]) error {
	opts, err := readOptions(r)
	if err != nil {
		return err
	}
	level := client.Linearizable
	if r.Serializable {
		level = client.Serializable
	}
	opts = append(opts, client.WithConsistency(level))
	if r.Revision > 0 {
		opts = append(opts, client.WithRev(kvdRev(r.Revision)))
	}
	end, sent := rangeEnd(r.Key, r.RangeEnd), int64(0)
	page := func() client.ReadOption {
		if r.Limit > 0 {
			return client.WithLimit(int(min(r.Limit-sent, rangeStreamPageKeys)))
		}
		return client.WithLimit(rangeStreamPageKeys)
	}
	// The first page counts the whole range (a limit makes the client
	// ask for the total); the others only read.
	res, err := s.c.Range(ctx, r.Key, end, append(opts, page())...)
	if err != nil {
		return err
	}
	count, rev, current := res.Count, res.Revision, res.CurrentRevision
	for {
		sent += int64(len(res.KVs))
		if !res.More || r.Limit > 0 && sent >= r.Limit {
			return sendChunks(stream, &pb.RangeResponse{Header: s.header(current), Kvs: kvsOf(res.KVs), More: res.More, Count: int64(count)})
		}
		if err := sendChunks(stream, &pb.RangeResponse{Kvs: kvsOf(res.KVs)}); err != nil {
			return err
		}
		if f := s.cfg.Knobs.BeforeRangeStreamPage; f != nil {
			f()
		}
		res, err = s.c.Range(ctx, res.Next, end, append(opts, client.WithRev(rev), page(), client.WithoutCount())...)
		if err != nil {
			return err
		}
	}
}

// sendChunks sends resp's keys in messages of at most
// rangeStreamChunkBytes of keys and values (at least one key each), the
// last with resp's other fields.
func sendChunks(stream grpc.ServerStreamingServer[pb.RangeStreamResponse], resp *pb.RangeResponse) error {
	kvs, size := resp.Kvs, 0
	for i := 0; i < len(kvs); i++ {
		size += len(kvs[i].Key) + len(kvs[i].Value)
		if size > rangeStreamChunkBytes && i > 0 {
			if err := stream.Send(&pb.RangeStreamResponse{RangeResponse: &pb.RangeResponse{Kvs: kvs[:i]}}); err != nil {
				return err
			}
			kvs, i, size = kvs[i:], -1, 0
		}
	}
	resp.Kvs = kvs
	return stream.Send(&pb.RangeStreamResponse{RangeResponse: resp})
}
