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
		CreateRevision: int64(kv.CreateRevision),
		ModRevision:    int64(kv.ModRevision),
		Version:        int64(kv.Version),
		Lease:          int64(kv.Lease),
	}
}

// event is e as etcd's mvccpb.Event; its prev_kv only if prevKV. kvd's
// events carry a PUT's mod revision only: its create revision and
// version come from the key as it was before (e.PrevKV, which the watch
// always asks kvd for), as etcd's clients derive IsCreate and IsModify
// from them. Its lease is not carried (0).
func event(e *client.Event, prevKV bool) *mvccpb.Event {
	ev := &mvccpb.Event{Kv: &mvccpb.KeyValue{Key: e.Key, ModRevision: int64(e.ModRevision)}}
	if e.Type == client.EventDelete {
		ev.Type = mvccpb.DELETE
	} else {
		ev.Kv.Value = e.Value
		ev.Kv.CreateRevision, ev.Kv.Version = int64(e.ModRevision), 1
		if p := e.PrevKV; p != nil {
			ev.Kv.CreateRevision, ev.Kv.Version = int64(p.CreateRevision), int64(p.Version)+1
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
