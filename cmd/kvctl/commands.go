package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/kvd-project/kvd/client"
)

type env struct {
	c   *client.Client
	o   *options
	eps []string
	in  io.Reader
	out io.Writer
	// errOut is standard error; base is the command's context without
	// --timeout, ended by an interrupt (for lease keepalive's loop).
	errOut io.Writer
	base   context.Context
}

type command struct {
	args  string // usage of the arguments
	nargs []int  // accepted argument counts; a negative -n means at least n
	run   func(ctx context.Context, e *env, args []string) error
}

func (c command) check(args []string) error {
	for _, n := range c.nargs {
		if len(args) == n || n < 0 && len(args) >= -n {
			return nil
		}
	}
	return usageError{"usage: kvctl " + c.args}
}

const memberUsage = "member list | add ID ADDR | promote ID | remove ID"

var commands = map[string]command{
	"put":      {"put KEY [VALUE] (no VALUE: --value-file or standard input)", []int{1, 2}, runPut},
	"get":      {"get KEY", []int{1}, runGet},
	"mget":     {"mget KEY...", []int{-1}, runMget},
	"del":      {delUsage, []int{1, 2}, runDel},
	"delete":   {delUsage, []int{1, 2}, runDel},
	"txn":      {"txn (reads the transaction from standard input)", []int{0}, runTxn},
	"watch":    {"watch [--prefix] KEY [--rev N] [--prev-kv] [--progress-notify]", []int{1}, runWatch},
	"status":   {"status", []int{0}, runStatus},
	"endpoint": {endpointUsage, []int{1}, runEndpoint},
	"member":   {memberUsage, []int{1, 2, 3}, runMember},
	"lease":    {leaseUsage, []int{1, 2}, runLease},
	"snapshot": {snapshotUsage, []int{2}, runSnapshot},

	"move-leader": {moveLeaderUsage, []int{1}, runMoveLeader},  // leader.go
	"compaction":  {"compaction REV", []int{1}, runCompaction}, // leader.go
}

func (e *env) json(v any) error {
	enc := json.NewEncoder(e.out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func runPut(ctx context.Context, e *env, args []string) error {
	var value []byte
	var err error
	if !e.o.ignoreValue || len(args) == 2 {
		// With --ignore-value a VALUE is refused by the server's rule
		// ("value is provided"); none is read from standard input.
		if value, err = e.value(args); err != nil {
			return err
		}
	}
	if e.o.prevKV {
		return putPrev(ctx, e, args[0], value)
	}
	version, err := e.c.PutRevision(ctx, []byte(args[0]), value, e.o.writeOptions()...)
	if err != nil {
		return err
	}
	if e.o.write == "json" {
		return e.json(map[string]any{"ok": true, "key": args[0], "revision": version})
	}
	fmt.Fprintln(e.out, "OK")
	return nil
}

// value is a put's value: the argument, else --value-file, else standard
// input (so values past the OS argument limit, up to client.MaxValue, can
// be stored, and binary ones exactly).
func (e *env) value(args []string) ([]byte, error) {
	switch {
	case len(args) == 2 && e.o.valueFile != "":
		return nil, usageError{"put: give VALUE or --value-file, not both"}
	case len(args) == 2:
		return []byte(args[1]), nil
	}
	r, name := e.in, "standard input"
	if e.o.valueFile != "" {
		f, err := os.Open(e.o.valueFile)
		if err != nil {
			return nil, fmt.Errorf("put: %w", err)
		}
		defer f.Close()
		r, name = f, e.o.valueFile
	}
	v, err := io.ReadAll(io.LimitReader(r, client.MaxValue+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("put: reading the value from %s: %w", name, err)
	case len(v) > client.MaxValue:
		return nil, fmt.Errorf("put: the value in %s is larger than %d bytes: %w", name, client.MaxValue, client.ErrValueTooLarge)
	}
	return v, nil
}

// kv is a key/value pair as JSON shows it; values that are not UTF-8 text are
// given in base64 instead.
type kv struct {
	Key       string `json:"key,omitempty"`
	KeyBase64 []byte `json:"key_base64,omitempty"` // a key that is not UTF-8
	// Value is there whenever the value is known and UTF-8 text, even
	// empty; ValueBase64 instead when it is not text.
	Value       *string `json:"value,omitempty"`
	ValueBase64 []byte  `json:"value_base64,omitempty"`
	// As etcdctl's JSON, a field that is 0 is left out (an event's
	// metadata beyond its mod revision, a deleted key's).
	CreateRevision uint64 `json:"create_revision,omitempty"`
	ModRevision    uint64 `json:"mod_revision,omitempty"`
	Version        uint64 `json:"version,omitempty"`
	Lease          string `json:"lease,omitempty"` // as lease grant prints it
	raw            []byte // the value's bytes, for the text formats
	name           string // the key's bytes, for the text formats
}

func runGet(ctx context.Context, e *env, args []string) error {
	if e.o.fromVersion.set {
		return runScan(ctx, e, args) // a read at a revision is a range read
	}
	v, meta, _, err := e.c.GetMeta(ctx, []byte(args[0]))
	if err != nil {
		return err
	}
	switch e.o.write {
	case "json":
		return e.json(toKV(args[0], v, meta))
	case "table":
		tw := tabwriter.NewWriter(e.out, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "KEY\tVALUE\tMOD_REVISION\n%s\t%s\t%d\n", tableField([]byte(args[0])), tableField(v), meta.ModRevision)
		return tw.Flush()
	case "raw":
		_, err = e.out.Write(v)
		return err
	}
	_, err = fmt.Fprintf(e.out, "%s\n", v)
	return err
}

// runMget prints every key that exists with its value, in the order given;
// missing keys are named on stderr and make kvctl exit 1, as get does.
func runMget(ctx context.Context, e *env, args []string) error {
	if len(args) > client.MaxGetMany {
		return usageError{fmt.Sprintf("mget: %d keys, at most %d", len(args), client.MaxGetMany)}
	}
	if e.o.write == "raw" {
		return usageError{"mget: -w raw cannot separate values; use simple, json or table"}
	}
	keys := make([][]byte, len(args))
	for i, a := range args {
		keys[i] = []byte(a)
	}
	var res []client.Result
	var err error
	if e.o.atomic {
		res, _, err = e.c.GetManyAtomic(ctx, keys)
	} else {
		res, err = e.c.GetMany(ctx, keys)
	}
	if err != nil {
		return err
	}
	var missing []string
	var found []kv
	for i, r := range res {
		if !r.Found {
			missing = append(missing, args[i])
			continue
		}
		found = append(found, toKV(args[i], r.Value, r.Meta))
	}
	if err := e.printMany(found); err != nil {
		return err
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s", client.ErrNotFound, strings.Join(missing, " "))
	}
	return nil
}

func toKV(key string, v []byte, m client.Meta) kv {
	out := kv{Key: key, CreateRevision: m.CreateRevision, ModRevision: m.ModRevision, Version: m.Version, raw: v, name: key}
	if m.Lease != 0 {
		out.Lease = m.Lease.String()
	}
	if !utf8.ValidString(key) {
		out.Key, out.KeyBase64 = "", []byte(key)
	}
	if utf8.Valid(v) {
		s := string(v)
		out.Value = &s
	} else {
		out.ValueBase64 = v
	}
	return out
}

func (e *env) printMany(kvs []kv) error {
	switch e.o.write {
	case "json":
		if kvs == nil {
			kvs = []kv{}
		}
		return e.json(kvs)
	case "table":
		tw := tabwriter.NewWriter(e.out, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "KEY\tVALUE\tMOD_REVISION\n")
		for _, x := range kvs {
			fmt.Fprintf(tw, "%s\t%s\t%d\n", tableField([]byte(x.name)), tableField(x.raw), x.ModRevision)
		}
		return tw.Flush()
	}
	for _, x := range kvs { // simple: key and value on a line each, as etcdctl prints a range
		if _, err := fmt.Fprintf(e.out, "%s\n%s\n", x.name, x.raw); err != nil {
			return err
		}
	}
	return nil
}

// runDel prints the number of keys deleted, 1 or 0, and exits 0 either
// way, as etcdctl does: a script deleting a key that may be gone need not
// tell "already gone" from a failure by its exit status (a conflict of
// --if-mod-revision still exits 1).
func runDel(ctx context.Context, e *env, args []string) error {
	if len(args) == 2 || e.o.fromKey || e.o.scan.prefix || e.o.prevKV {
		return runDelRange(ctx, e, args)
	}
	deleted := 1
	err := e.c.Delete(ctx, []byte(args[0]), e.o.writeOptions()...)
	switch {
	case errors.Is(err, client.ErrNotFound):
		deleted = 0
	case err != nil:
		return err
	}
	if e.o.write == "json" {
		return e.json(map[string]any{"deleted": deleted, "key": args[0]})
	}
	_, err = fmt.Fprintln(e.out, deleted)
	return err
}

func runMember(ctx context.Context, e *env, args []string) error {
	switch {
	case args[0] == "list" && len(args) == 1:
		ms, err := e.c.Members(ctx)
		if err != nil {
			return err
		}
		if e.o.write == "json" {
			return e.json(membersJSON(ms))
		}
		tw := tabwriter.NewWriter(e.out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tPEER ADDR\tCLIENT ADDR\tLEARNER")
		for _, m := range ms {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%v\n", m.ID, m.Addr, cmp.Or(m.ClientAddr, "-"), m.IsLearner)
		}
		return tw.Flush()
	case args[0] == "add" && len(args) == 3:
		id, err := parseID(args[1])
		if err != nil {
			return err
		}
		if err := e.c.AddMember(ctx, id, args[2]); err != nil {
			return err
		}
		return e.print(memberJSON{client.Member{ID: id, Addr: args[2], IsLearner: true}, jsonID(id)},
			fmt.Sprintf("added member %d at %s as a learner; start it with --id %d --join, then run: kvctl member promote %d",
				id, args[2], id, id))
	case args[0] == "promote" && len(args) == 2:
		id, err := parseID(args[1])
		if err != nil {
			return err
		}
		if err := e.c.PromoteMember(ctx, id); err != nil {
			return err
		}
		return e.print(map[string]any{"id": jsonID(id), "promoted": true}, fmt.Sprintf("promoted member %d to voter", id))
	case args[0] == "remove" && len(args) == 2:
		id, err := parseID(args[1])
		if err != nil {
			return err
		}
		if err := e.c.RemoveMember(ctx, id); err != nil {
			return err
		}
		return e.print(map[string]any{"id": jsonID(id), "removed": true}, fmt.Sprintf("removed member %d", id))
	}
	return usageError{"usage: kvctl " + memberUsage}
}

func parseID(s string) (uint64, error) {
	id, ok := parseUint64ID(s)
	if !ok {
		return 0, usageError{idUsage("member id", s)}
	}
	return id, nil
}
