package main

import (
	"bufio"
	"context"
	"fmt"

	"github.com/kvd-project/kvd/client"
)

const delUsage = "del KEY [END] (or --prefix KEY, --from-key KEY)"

// runDelRange deletes a range as etcdctl's del does: KEY to END
// (exclusive), every key under KEY (--prefix), every key from KEY on
// (--from-key), or KEY alone with --prev-kv. It prints how many keys it
// deleted, then with --prev-kv each deleted key and its value on a line
// each.
func runDelRange(ctx context.Context, e *env, args []string) error {
	key := []byte(args[0])
	var opts []client.WriteOption
	if e.o.prevKV {
		opts = append(opts, client.WithPrevKV())
	}
	var r *client.DeleteResponse
	var err error
	switch {
	case len(args) == 2 && (e.o.scan.prefix || e.o.fromKey):
		return usageError{"del: give END, --prefix or --from-key, not two of them"}
	case e.o.scan.prefix && e.o.fromKey:
		return usageError{"del: give --prefix or --from-key, not both"}
	case e.o.scan.prefix:
		r, err = e.c.DeletePrefix(ctx, key, opts...)
	case e.o.fromKey:
		r, err = e.c.DeleteRange(ctx, key, nil, opts...)
	case len(args) == 2:
		r, err = e.c.DeleteRange(ctx, key, []byte(args[1]), opts...)
	default: // one key, as a range, for its previous value
		r, err = e.c.DeleteRange(ctx, key, append(key[:len(key):len(key)], 0), opts...)
	}
	if err != nil {
		return err
	}
	prev := make([]kv, len(r.PrevKVs))
	for i, x := range r.PrevKVs {
		prev[i] = toKV(string(x.Key), x.Value, x.Meta)
	}
	if e.o.write == "json" {
		return e.json(struct {
			Deleted  int64  `json:"deleted"`
			PrevKVs  []kv   `json:"prev_kvs,omitempty"`
			Revision uint64 `json:"revision"`
		}{r.Deleted, prev, r.Revision})
	}
	w := bufio.NewWriter(e.out)
	fmt.Fprintln(w, r.Deleted)
	for _, x := range prev {
		fmt.Fprintf(w, "%s\n%s\n", x.name, x.raw)
	}
	return w.Flush()
}

// putPrev is put --prev-kv: etcdctl prints OK, then the previous key and
// value if there was one.
func putPrev(ctx context.Context, e *env, key string, value []byte) error {
	prev, rev, err := e.c.PutPrev(ctx, []byte(key), value, e.o.writeOptions()...)
	if err != nil {
		return err
	}
	if e.o.write == "json" {
		out := struct {
			OK       bool   `json:"ok"`
			Key      string `json:"key"`
			Revision uint64 `json:"revision"`
			PrevKV   *kv    `json:"prev_kv,omitempty"`
		}{OK: true, Key: key, Revision: rev}
		if prev != nil {
			p := toKV(string(prev.Key), prev.Value, prev.Meta)
			out.PrevKV = &p
		}
		return e.json(out)
	}
	if prev == nil {
		_, err = fmt.Fprintln(e.out, "OK")
		return err
	}
	_, err = fmt.Fprintf(e.out, "OK\n%s\n%s\n", prev.Key, prev.Value)
	return err
}
