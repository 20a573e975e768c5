package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/kvd-project/kvd/client"
)

// scanFlags are get's range options: --prefix, --from, --to, --limit,
// --keys-only, --count-only (or --count), --sort-by, --order; with
// --from-key and get KEY END, which main's options hold.
type scanFlags struct {
	prefix          bool
	from, to        optString
	limit           int
	keysOnly, count bool
	sortBy, order   optString
}

// optString is a string flag that knows whether it was given (--from ""
// is the first key, --to "" no upper bound).
type optString struct {
	set bool
	v   string
}

func (f *optString) String() string { return f.v }

func (f *optString) Set(s string) error {
	f.set, f.v = true, s
	return nil
}

// any reports whether get is a scan.
func (f *scanFlags) any() bool {
	return f.prefix || f.from.set || f.to.set || f.limit != 0 || f.keysOnly || f.count || f.sortBy.set || f.order.set
}

// onlyPrefix reports whether --prefix is the one range option given.
func (f *scanFlags) onlyPrefix() bool {
	return f.prefix && !f.from.set && !f.to.set && f.limit == 0 && !f.keysOnly && !f.count && !f.sortBy.set && !f.order.set
}

// check rejects combinations that mean nothing, for a get with args
// (fromKey: --from-key).
func (f *scanFlags) check(args []string, fromKey bool) error {
	if _, _, err := f.sort(); err != nil {
		return err
	}
	switch {
	case f.limit < 0:
		return usageError{"--limit must not be negative"}
	case f.keysOnly && f.count:
		return usageError{"--keys-only and --count-only exclude each other"}
	case f.prefix && (f.from.set || f.to.set || fromKey || len(args) == 2):
		return usageError{"--prefix excludes --from, --to, --from-key and END"}
	case fromKey && (f.from.set || f.to.set || len(args) != 1):
		return usageError{"usage: kvctl get --from-key KEY"}
	case f.prefix && len(args) != 1:
		return usageError{"usage: kvctl get --prefix PREFIX"}
	case f.from.set || f.to.set:
		if len(args) != 0 {
			return usageError{"get --from/--to takes no KEY"}
		}
	case len(args) != 1 && len(args) != 2:
		return usageError{"get --limit, --keys-only, --count-only, --sort-by or --order needs KEY [END], --prefix PREFIX, --from-key KEY or --from/--to"}
	}
	return nil
}

// sort is --sort-by and --order as the client's, in etcdctl's words
// (either case): --order alone sorts by key, --sort-by alone ascends.
func (f *scanFlags) sort() (client.SortTarget, client.SortOrder, error) {
	targets := map[string]client.SortTarget{"": client.SortByKey, "KEY": client.SortByKey, "VERSION": client.SortByVersion,
		"CREATE": client.SortByCreateRevision, "MODIFY": client.SortByModRevision, "VALUE": client.SortByValue}
	orders := map[string]client.SortOrder{"": client.SortNone, "ASCEND": client.SortAscend, "DESCEND": client.SortDescend}
	t, ok := targets[strings.ToUpper(f.sortBy.v)]
	if !ok {
		return 0, 0, usageError{fmt.Sprintf("--sort-by %q: want CREATE, KEY, MODIFY, VALUE or VERSION", f.sortBy.v)}
	}
	o, ok := orders[strings.ToUpper(f.order.v)]
	if !ok {
		return 0, 0, usageError{fmt.Sprintf("--order %q: want ASCEND or DESCEND", f.order.v)}
	}
	return t, o, nil
}

// scanJSON is -w json's output for a scan.
type scanJSON struct {
	KVs   []kv   `json:"kvs"`
	Count uint64 `json:"count"`
	More  bool   `json:"more"`
	Next  string `json:"next,omitempty"`
	// NextBase64 replaces Next when the key is not UTF-8.
	NextBase64 []byte `json:"next_base64,omitempty"`
	// Revision is the store revision the keys are shown at.
	Revision uint64 `json:"revision"`
}

// runScan serves get with range flags: a prefix (get --prefix P), a range
// (get KEY END, --from A --to B; --to omitted: no upper bound), every key
// from KEY on (--from-key KEY), or a single KEY's range [KEY, KEY+"\x00")
// with --limit, --keys-only, --count-only or a sort. Keys print in key
// order unless --sort-by or --order say otherwise, as mget prints them
// (keys only: one per line; --count-only: the number). An empty result
// prints nothing and exits 0, as etcdctl does.
func runScan(ctx context.Context, e *env, args []string) error {
	f := &e.o.scan
	if err := f.check(args, e.o.fromKey); err != nil {
		return err
	}
	if e.o.write == "raw" {
		return usageError{"get with range flags: -w raw cannot separate values; use simple, json or table"}
	}
	opts := e.o.scanOptions()
	var r *client.RangeResponse
	var err error
	switch {
	case f.prefix:
		r, err = e.c.Prefix(ctx, []byte(args[0]), opts...)
	case e.o.fromKey:
		r, err = e.c.Range(ctx, []byte(args[0]), nil, opts...)
	case len(args) == 2:
		r, err = e.c.Range(ctx, []byte(args[0]), []byte(args[1]), opts...)
	case f.from.set || f.to.set:
		r, err = e.c.Range(ctx, []byte(f.from.v), []byte(f.to.v), opts...)
	default: // one key, as a range
		key := []byte(args[0])
		end := append(key[:len(key):len(key)], 0)
		if len(key) >= client.MaxKey {
			// No key is longer than MaxKey, so [KEY, KEY+"\x00") holds
			// what KEY's prefix range does, and that bound fits.
			end = client.PrefixEnd(key)
		}
		r, err = e.c.Range(ctx, key, end, opts...)
	}
	if err != nil {
		return err
	}
	if len(r.KVs) == 0 && !f.any() && !e.o.fromKey && len(args) == 1 {
		return client.ErrNotFound // get KEY --rev N: as get KEY, a missing key fails
	}
	kvs := make([]kv, len(r.KVs))
	for i, x := range r.KVs {
		kvs[i] = toKV(string(x.Key), x.Value, x.Meta)
		if f.keysOnly {
			kvs[i].Value = nil // not read: absent, not empty
		}
	}
	switch {
	case e.o.write == "json":
		out := scanJSON{KVs: kvs, Count: r.Count, More: r.More, Revision: r.Revision}
		if r.More {
			if utf8.Valid(r.Next) {
				out.Next = string(r.Next)
			} else {
				out.NextBase64 = r.Next
			}
		}
		return e.json(out)
	case f.count:
		_, err := fmt.Fprintln(e.out, r.Count)
		return err
	case f.keysOnly && e.o.write == "table":
		tw := tabwriter.NewWriter(e.out, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "KEY\tMOD_REVISION\n")
		for _, x := range kvs {
			fmt.Fprintf(tw, "%s\t%d\n", tableField([]byte(x.name)), x.ModRevision)
		}
		return tw.Flush()
	case f.keysOnly:
		for _, x := range kvs {
			if _, err := fmt.Fprintln(e.out, x.name); err != nil {
				return err
			}
		}
		return nil
	}
	return e.printMany(kvs)
}

// scanOptions are the client's options for get's range flags.
func (o *options) scanOptions() []client.ReadOption {
	var opts []client.ReadOption
	if o.fromVersion.set {
		opts = append(opts, client.WithRev(o.fromVersion.v))
	}
	if o.scan.limit > 0 {
		opts = append(opts, client.WithLimit(o.scan.limit))
	}
	if o.scan.keysOnly {
		opts = append(opts, client.WithKeysOnly())
	}
	if o.scan.count {
		opts = append(opts, client.WithCountOnly())
	}
	if o.scan.sortBy.set || o.scan.order.set {
		t, order, _ := o.scan.sort() // checked
		opts = append(opts, client.WithSort(t, order))
	}
	return opts
}
