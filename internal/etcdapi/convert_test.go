package etcdapi

import (
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/kvd-project/kvd/client"
)

// TestEventOfKvdEventAsEtcds: a PUT carries its key's metadata (etcd's
// revisions are kvd's + 1); from a server that predates events' metadata
// the create revision and version come from the previous kv and the lease
// is 0; a DELETE carries only its revision.
func TestEventOfKvdEventAsEtcds(t *testing.T) {
	prev := &client.KV{Key: []byte("k"), Value: []byte("old"), Meta: client.Meta{CreateRevision: 3, ModRevision: 5, Version: 2, Lease: 9}}
	for _, tc := range []struct {
		name string
		e    client.Event
		want *mvccpb.KeyValue
	}{
		{"put with metadata", client.Event{Type: client.EventPut, Key: []byte("k"), Value: []byte("v"), ModRevision: 7,
			CreateRevision: 3, Version: 3, Lease: 9, PrevKV: prev},
			&mvccpb.KeyValue{Key: []byte("k"), Value: []byte("v"), CreateRevision: 4, ModRevision: 8, Version: 3, Lease: 9}},
		{"put without metadata", client.Event{Type: client.EventPut, Key: []byte("k"), Value: []byte("v"), ModRevision: 7, PrevKV: prev},
			&mvccpb.KeyValue{Key: []byte("k"), Value: []byte("v"), CreateRevision: 4, ModRevision: 8, Version: 3}},
		{"create without metadata", client.Event{Type: client.EventPut, Key: []byte("k"), Value: []byte("v"), ModRevision: 7},
			&mvccpb.KeyValue{Key: []byte("k"), Value: []byte("v"), CreateRevision: 8, ModRevision: 8, Version: 1}},
		{"delete", client.Event{Type: client.EventDelete, Key: []byte("k"), ModRevision: 7, PrevKV: prev},
			&mvccpb.KeyValue{Key: []byte("k"), ModRevision: 8}},
	} {
		got := event(&tc.e, false).Kv
		if got.String() != tc.want.String() {
			t.Errorf("%s: kv %v, want %v", tc.name, got, tc.want)
		}
	}
}
