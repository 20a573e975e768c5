package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/kvd-project/kvd/client"
)

// scanFlags are get's range options: --prefix, --from, --to, --limit,
// --keys-only, --count.
type scanFlags struct {
	prefix          bool
	from, to        optString
	limit           int
	keysOnly, count bool
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
	return f.prefix || f.from.set || f.to.set || f.limit != 0 || f.keysOnly || f.count
}

// onlyPrefix reports whether --prefix is the one range option given.
func (f *scanFlags) onlyPrefix() bool {
	return f.prefix && !f.from.set && !f.to.set && f.limit == 0 && !f.keysOnly && !f.count
}

// check rejects combinations that mean nothing, for a get with args.
func (f *scanFlags) check(args []string) error {
	switch {
	case f.limit < 0:
		return usageError{"--limit must not be negative"}
	case f.keysOnly && f.count:
		return usageError{"--keys-only and --count exclude each other"}
	case f.prefix && (f.from.set || f.to.set):
		return usageError{"--prefix excludes --from and --to"}
	case f.prefix && len(args) != 1:
		return usageError{"usage: kvctl get --prefix PREFIX"}
	case f.from.set || f.to.set:
		if len(args) != 0 {
			return usageError{"get --from/--to takes no KEY"}
		}
	case len(args) != 1:
		return usageError{"get --limit, --keys-only or --count needs --prefix PREFIX, or --from/--to"}
	}
	return nil
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
// (--from A --to B; --to omitted: no upper bound), or a single KEY's
// range [KEY, KEY+"\x00") with --limit, --keys-only or --count. Keys print
// in key order, as mget prints them (keys only: one per line; --count: the
// number). An empty result prints nothing and exits 0, as etcdctl does.
func runScan(ctx context.Context, e *env, args []string) error {
	f := &e.o.scan
	if err := f.check(args); err != nil {
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
	if len(r.KVs) == 0 && !f.any() {
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
	return opts
}
