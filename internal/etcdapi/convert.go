package etcdapi

import (
	"context"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/kvd-project/kvd/client"
)

// keyValue is kv as etcd's mvccpb.KeyValue.
func keyValue(kv *client.KV) *mvccpb.KeyValue {
	return &mvccpb.KeyValue{
		Key:            kv.Key,
		Value:          kv.Value,
		CreateRevision: keyRev(kv.CreateRevision),
		ModRevision:    keyRev(kv.ModRevision),
		Version:        int64(kv.Version),
		Lease:          int64(kv.Lease),
	}
}

// event is e as etcd's mvccpb.Event; its prev_kv only if prevKV. A PUT's
// kv carries the key's create revision, version and lease after the
// write, as kvd's events do. A server that predates events' metadata
// sends none (CreateRevision 0): then the create revision and version come
// from the key as it was before (e.PrevKV, which the watch always asks
// kvd for), as etcd's clients derive IsCreate and IsModify from them, and
// the lease is not known (0).
func event(e *client.Event, prevKV bool) *mvccpb.Event {
	ev := &mvccpb.Event{Kv: &mvccpb.KeyValue{Key: e.Key, ModRevision: keyRev(e.ModRevision)}}
	switch {
	case e.Type == client.EventDelete:
		ev.Type = mvccpb.DELETE
	case e.CreateRevision != 0:
		ev.Kv.Value, ev.Kv.Lease = e.Value, int64(e.Lease)
		ev.Kv.CreateRevision, ev.Kv.Version = keyRev(e.CreateRevision), int64(e.Version)
	default:
		ev.Kv.Value = e.Value
		ev.Kv.CreateRevision, ev.Kv.Version = keyRev(e.ModRevision), 1
		if p := e.PrevKV; p != nil {
			ev.Kv.CreateRevision, ev.Kv.Version = keyRev(p.CreateRevision), int64(p.Version)+1
		}
	}
	if prevKV && e.PrevKV != nil {
		ev.PrevKv = keyValue(e.PrevKV)
	}
	return ev
}

// currentRevision is the store's revision now: a linearizable count of
// one key (any key does), which answers with the revision it read at.
func (s *Server) currentRevision(ctx context.Context) (uint64, error) {
	r, err := s.c.Range(ctx, []byte{0}, []byte{0, 0}, client.WithCountOnly())
	if err != nil {
		return 0, err
	}
	return r.Revision, nil
}

// writeContext is ctx for a write through kvd's client: its attempts at a
// node wait as long as ctx allows (client.WithAttemptTimeout), since etcd's
// clients bring their own deadlines (etcdctl's --command-timeout), and a
// write that outlasts the client's attempt bound (a large DeleteRange)
// would otherwise fail as etcd's "request timed out" though applied.
// Without a deadline the client's RequestTimeout bounds it.
func writeContext(ctx context.Context) context.Context {
	return client.WithAttemptTimeout(ctx, -1)
}
