package main_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// goStep is one call of the clientv3 script; it returns the response to
// print, or the error.
type goStep struct {
	name string
	do   func(g *goRunner) (any, error)
}

// goRunner runs the clientv3 script against one side.
type goRunner struct {
	ctx   context.Context
	cli   *clientv3.Client
	p     string
	base  int64
	lease clientv3.LeaseID
}

// r is the revision n writes after the script's start.
func (g *goRunner) r(n int64) int64 { return g.base + n }

// goScript is the clientv3 script: the calls of the etcdctl script and
// the options etcdctl has no flag for, with the responses printed whole.
func goScript() []goStep {
	put := func(name, k, v string, opts ...clientv3.OpOption) goStep {
		return goStep{name, func(g *goRunner) (any, error) { return g.cli.Put(g.ctx, g.p+k, v, opts...) }}
	}
	get := func(name, k string, opts ...clientv3.OpOption) goStep {
		return goStep{name, func(g *goRunner) (any, error) { return g.cli.Get(g.ctx, g.p+k, opts...) }}
	}
	getRev := func(name, k string, rev int64) goStep {
		return goStep{name, func(g *goRunner) (any, error) { return g.cli.Get(g.ctx, g.p+k, clientv3.WithRev(g.r(rev))) }}
	}
	steps := []goStep{
		put("Put", "k", "v"), // r+1
		get("Get", "k"),
		put("Put p/a", "p/a", "1"), // r+2
		put("Put p/b", "p/b", "2"), // r+3
		put("Put p/c", "p/c", "3"), // r+4
		get("Get WithPrefix", "p/", clientv3.WithPrefix()),
		get("Get WithFromKey WithLimit", "p/b", clientv3.WithFromKey(), clientv3.WithLimit(2)),
		get("Get WithLimit", "p/", clientv3.WithPrefix(), clientv3.WithLimit(1)),
		get("Get WithSort mod descend", "p/", clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByModRevision, clientv3.SortDescend)),
		get("Get WithSort value WithLimit", "p/", clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByValue, clientv3.SortDescend), clientv3.WithLimit(2)),
		get("Get WithKeysOnly", "p/", clientv3.WithPrefix(), clientv3.WithKeysOnly()),
		get("Get WithCountOnly", "p/", clientv3.WithPrefix(), clientv3.WithCountOnly()),
		{"Get WithMinModRev", func(g *goRunner) (any, error) {
			return g.cli.Get(g.ctx, g.p+"p/", clientv3.WithPrefix(), clientv3.WithMinModRev(g.r(3)))
		}},
		{"Get WithMaxCreateRev WithLimit", func(g *goRunner) (any, error) {
			return g.cli.Get(g.ctx, g.p+"p/", clientv3.WithPrefix(), clientv3.WithMaxCreateRev(g.r(3)), clientv3.WithLimit(1))
		}},
		get("Get missing", "missing"),
		put("Put WithPrevKV", "k", "v2", clientv3.WithPrevKV()),                                // r+5
		put("Put WithIgnoreValue", "k", "", clientv3.WithIgnoreValue(), clientv3.WithPrevKV()), // r+6
		put("Put WithIgnoreValue missing", "nokey", "", clientv3.WithIgnoreValue()),
		{"Put empty key", func(g *goRunner) (any, error) { return g.cli.Put(g.ctx, "", "v") }},
		getRev("Get WithRev past", "k", 1),
		getRev("Get WithRev before the key", "k", 0),
		getRev("Get WithRev future", "k", 1000),
		{"Delete WithPrevKV", func(g *goRunner) (any, error) { return g.cli.Delete(g.ctx, g.p+"p/a", clientv3.WithPrevKV()) }}, // r+7
		{"Delete WithPrefix WithPrevKV", func(g *goRunner) (any, error) {
			return g.cli.Delete(g.ctx, g.p+"p/", clientv3.WithPrefix(), clientv3.WithPrevKV()) // r+8
		}},
		{"Delete missing", func(g *goRunner) (any, error) { return g.cli.Delete(g.ctx, g.p+"p/a") }},
	}
	steps = append(steps, goTxnSteps()...)
	steps = append(steps, goCompactSteps()...)
	steps = append(steps, goWatchSteps()...)
	return append(steps, goLeaseSteps()...)
}

// goTxnSteps: both branches, every compare target, nesting, and the
// requests etcd refuses.
func goTxnSteps() []goStep {
	var tooMany []clientv3.Op
	for i := 0; i <= 128; i++ {
		tooMany = append(tooMany, clientv3.OpPut(fmt.Sprint("many/", i), "x"))
	}
	return []goStep{
		{"Txn value success", func(g *goRunner) (any, error) { // r+9
			k := g.p + "k"
			return g.cli.Txn(g.ctx).If(clientv3.Compare(clientv3.Value(k), "=", "v2")).
				Then(clientv3.OpPut(g.p+"t", "v1"), clientv3.OpGet(k)).Else(clientv3.OpGet(k)).Commit()
		}},
		{"Txn version failure", func(g *goRunner) (any, error) {
			k := g.p + "k"
			return g.cli.Txn(g.ctx).If(clientv3.Compare(clientv3.Version(k), "=", 1)).
				Then(clientv3.OpPut(k, "no")).Else(clientv3.OpGet(k), clientv3.OpGet(g.p, clientv3.WithPrefix(), clientv3.WithCountOnly())).Commit()
		}},
		{"Txn create mod success", func(g *goRunner) (any, error) { // r+10
			k, t := g.p+"k", g.p+"t"
			return g.cli.Txn(g.ctx).If(clientv3.Compare(clientv3.CreateRevision(k), "=", g.r(1)), clientv3.Compare(clientv3.ModRevision(t), ">", g.r(1))).
				Then(clientv3.OpDelete(t, clientv3.WithPrevKV()), clientv3.OpPut(k, "v3", clientv3.WithPrevKV())).Commit()
		}},
		{"Txn lease compare", func(g *goRunner) (any, error) {
			k := g.p + "k"
			return g.cli.Txn(g.ctx).If(clientv3.Compare(clientv3.LeaseValue(k), "=", 0)).Then(clientv3.OpGet(k, clientv3.WithKeysOnly())).Commit()
		}},
		{"Txn nested", func(g *goRunner) (any, error) { // r+11
			k := g.p + "k"
			inner := clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.Value(k), "=", "v3")},
				[]clientv3.Op{clientv3.OpPut(g.p+"n", "1"), clientv3.OpGet(g.p + "n")}, nil)
			return g.cli.Txn(g.ctx).Then(inner, clientv3.OpGet(k, clientv3.WithCountOnly())).Commit()
		}},
		{"Txn empty", func(g *goRunner) (any, error) { return g.cli.Txn(g.ctx).Commit() }},
		{"Txn too many ops", func(g *goRunner) (any, error) { return g.cli.Txn(g.ctx).Then(tooMany...).Commit() }},
		{"Txn duplicate key", func(g *goRunner) (any, error) {
			return g.cli.Txn(g.ctx).Then(clientv3.OpPut(g.p+"dup", "1"), clientv3.OpPut(g.p+"dup", "2")).Commit()
		}},
		{"Txn past read", func(g *goRunner) (any, error) {
			return g.cli.Txn(g.ctx).Then(clientv3.OpGet(g.p+"k", clientv3.WithRev(g.r(1)))).Commit()
		}},
		{"Put too large", func(g *goRunner) (any, error) { return g.cli.Put(g.ctx, g.p+"big", strings.Repeat("x", 1800<<10)) }},
	}
}

// goCompactSteps: compaction, and reads and compactions below it.
func goCompactSteps() []goStep {
	return []goStep{
		{"Put c", func(g *goRunner) (any, error) { return g.cli.Put(g.ctx, g.p+"c", "1") }},   // r+12
		{"Put c 2", func(g *goRunner) (any, error) { return g.cli.Put(g.ctx, g.p+"c", "2") }}, // r+13
		{"Compact", func(g *goRunner) (any, error) { return g.cli.Compact(g.ctx, g.r(12), clientv3.WithCompactPhysical()) }},
		{"Get WithRev below compaction", func(g *goRunner) (any, error) { return g.cli.Get(g.ctx, g.p+"c", clientv3.WithRev(g.r(11))) }},
		{"Get WithRev at compaction", func(g *goRunner) (any, error) { return g.cli.Get(g.ctx, g.p+"c", clientv3.WithRev(g.r(12))) }},
		{"Compact again", func(g *goRunner) (any, error) { return g.cli.Compact(g.ctx, g.r(12)) }},
		{"Compact future", func(g *goRunner) (any, error) { return g.cli.Compact(g.ctx, g.r(1000)) }},
	}
}

// goWatchSteps: a watch replaying history, with previous values, and one
// from a compacted revision.
func goWatchSteps() []goStep {
	put := func(k, v string) func(g *goRunner) (any, error) {
		return func(g *goRunner) (any, error) { return g.cli.Put(g.ctx, g.p+k, v) }
	}
	return []goStep{
		{"Put w/1", put("w/1", "a")},   // r+14
		{"Put w/1 b", put("w/1", "b")}, // r+15
		{"Delete w/1", func(g *goRunner) (any, error) { return g.cli.Delete(g.ctx, g.p+"w/1") }}, // r+16
		{"Put w/2", put("w/2", "c")}, // r+17
		{"Watch WithRev WithPrevKV", func(g *goRunner) (any, error) {
			return g.watch(4, g.p+"w/", clientv3.WithPrefix(), clientv3.WithRev(g.r(14)), clientv3.WithPrevKV())
		}},
		{"Watch WithRev WithFilterPut", func(g *goRunner) (any, error) {
			return g.watch(1, g.p+"w/", clientv3.WithPrefix(), clientv3.WithRev(g.r(14)), clientv3.WithFilterPut())
		}},
		{"Watch WithRev compacted", func(g *goRunner) (any, error) {
			return g.watch(1, g.p+"w/", clientv3.WithPrefix(), clientv3.WithRev(g.r(2)))
		}},
	}
}

// watchOut is what a watch step prints: the events it got, in order, and
// how it ended if the server ended it.
type watchOut struct {
	Events          []json.RawMessage `json:"events"`
	Canceled        bool              `json:"canceled,omitempty"`
	CompactRevision int64             `json:"compact_revision,omitempty"`
	Err             string            `json:"err,omitempty"`
}

// watch watches until n events came, the server ended the watch, or
// watchBound passed.
func (g *goRunner) watch(n int, key string, opts ...clientv3.OpOption) (any, error) {
	ctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(g.ctx), watchBound)
	defer cancel()
	var out watchOut
	for wr := range g.cli.Watch(ctx, key, opts...) {
		for _, e := range wr.Events {
			out.Events = append(out.Events, protoJSON((*mvccpb.Event)(e)))
		}
		if wr.Canceled {
			out.Canceled, out.CompactRevision = true, wr.CompactRevision
			if err := wr.Err(); err != nil {
				out.Err = errText(err)
			}
			return out, nil
		}
		if len(out.Events) >= n {
			return out, nil
		}
	}
	out.Err = "watch ended: " + errText(ctx.Err())
	return out, nil
}

// leaseTTL is what a TimeToLive step prints; the remaining TTL is a clock
// reading, so only whether the lease is live is shown.
type leaseTTL struct {
	Header     *pb.ResponseHeader `json:"header"`
	ID         clientv3.LeaseID   `json:"id"`
	Live       bool               `json:"live"`
	TTL        int64              `json:"ttl,omitempty"` // -1: expired or revoked
	GrantedTTL int64              `json:"granted_ttl"`
	Keys       []string           `json:"keys"`
}

// goLeaseSteps: grant, attach, time to live with keys, keep-alive, list,
// revoke.
func goLeaseSteps() []goStep {
	ttl := func(g *goRunner) (any, error) {
		r, err := g.cli.TimeToLive(g.ctx, g.lease, clientv3.WithAttachedKeys())
		if err != nil {
			return nil, err
		}
		out := leaseTTL{Header: r.ResponseHeader, ID: r.ID, Live: r.TTL > 0, GrantedTTL: r.GrantedTTL}
		if r.TTL < 0 {
			out.TTL = r.TTL
		}
		for _, k := range r.Keys {
			out.Keys = append(out.Keys, string(k))
		}
		return out, nil
	}
	return []goStep{
		{"Grant", func(g *goRunner) (any, error) {
			r, err := g.cli.Grant(g.ctx, 600)
			if err == nil {
				g.lease = r.ID
			}
			return r, err
		}},
		{"TimeToLive no keys", ttl},
		{"Put WithLease", func(g *goRunner) (any, error) { return g.cli.Put(g.ctx, g.p+"l", "v", clientv3.WithLease(g.lease)) }}, // r+18
		// Right after a write, with no lease call since: its header shows it.
		{"KeepAliveOnce", func(g *goRunner) (any, error) { return g.cli.KeepAliveOnce(g.ctx, g.lease) }},
		{"Get leased", func(g *goRunner) (any, error) { return g.cli.Get(g.ctx, g.p+"l") }},
		{"Watch WithRev leased", func(g *goRunner) (any, error) { return g.watch(1, g.p+"l", clientv3.WithRev(g.r(18))) }},
		{"TimeToLive WithAttachedKeys", ttl},
		{"Leases", func(g *goRunner) (any, error) {
			r, err := g.cli.Leases(g.ctx)
			if err != nil {
				return nil, err
			}
			return r.ResponseHeader, nil
		}},
		{"Revoke", func(g *goRunner) (any, error) { return g.cli.Revoke(g.ctx, g.lease) }}, // r+19
		{"TimeToLive revoked", ttl},
		{"Get revoked", func(g *goRunner) (any, error) { return g.cli.Get(g.ctx, g.p+"l") }},
		{"Watch WithRev revoked WithPrevKV", func(g *goRunner) (any, error) {
			return g.watch(2, g.p+"l", clientv3.WithRev(g.r(18)), clientv3.WithPrevKV())
		}},
		{"Revoke again", func(g *goRunner) (any, error) { return g.cli.Revoke(g.ctx, g.lease) }},
		{"Put WithLease unknown", func(g *goRunner) (any, error) {
			return g.cli.Put(g.ctx, g.p+"l", "v", clientv3.WithLease(0x1234abcd))
		}},
		{"KeepAliveOnce revoked", func(g *goRunner) (any, error) { return g.cli.KeepAliveOnce(g.ctx, g.lease) }},
		{"Get all WithCountOnly", func(g *goRunner) (any, error) {
			return g.cli.Get(g.ctx, g.p, clientv3.WithPrefix(), clientv3.WithCountOnly())
		}},
	}
}

// protoJSON prints m as JSON with the proto field names.
func protoJSON(m proto.Message) json.RawMessage {
	b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
	if err != nil {
		return json.RawMessage(fmt.Sprintf("%q", err.Error()))
	}
	return b
}

// errText shows an error as clientv3 gives it: etcd's errors are
// rpctypes.EtcdError values (code and message), others gRPC statuses.
func errText(err error) string {
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		return fmt.Sprintf("EtcdError %s: %s", ee.Code(), ee.Error())
	}
	if s, ok := status.FromError(err); ok {
		return fmt.Sprintf("status %s: %s", s.Code(), s.Message())
	}
	return fmt.Sprintf("%T: %v", err, err)
}

// show prints a step's response as JSON (the error if it failed).
func show(v any, err error) string {
	if err != nil {
		return "error " + errText(err)
	}
	var m proto.Message
	switch v := v.(type) {
	case *clientv3.PutResponse:
		m = (*pb.PutResponse)(v)
	case *clientv3.GetResponse:
		m = (*pb.RangeResponse)(v)
	case *clientv3.DeleteResponse:
		m = (*pb.DeleteRangeResponse)(v)
	case *clientv3.TxnResponse:
		m = (*pb.TxnResponse)(v)
	case *clientv3.CompactResponse:
		m = (*pb.CompactionResponse)(v)
	case proto.Message:
		m = v
	}
	if m != nil {
		return string(protoJSON(m))
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "marshal: " + err.Error()
	}
	return string(b)
}

// runGoScript runs the clientv3 script against endpoints with the keys
// under prefix p, and returns each step's normalised output.
func runGoScript(t *testing.T, endpoints []string, p string) []stepOut {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	base, err := cli.Get(ctx, "etcd-diff-base")
	if err != nil {
		t.Fatalf("clientv3 against %v: %v", endpoints, err)
	}
	g := &goRunner{ctx: ctx, cli: cli, p: p, base: base.Header.Revision}
	n := &normaliser{base: g.base, endpoints: endpoints}
	var outs []stepOut
	for _, s := range goScript() {
		outs = append(outs, stepOut{name: s.name, out: n.text(show(s.do(g)))})
	}
	return outs
}
