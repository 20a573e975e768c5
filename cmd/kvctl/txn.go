package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/kvd-project/kvd/client"
)

// The txn command reads a transaction from standard input in etcdctl's
// line format: compares, a blank line, the operations to run if every
// compare holds, a blank line, the operations to run otherwise.
//
//	ver("lock") = "0"            the key's version: writes since it was created (0: it does not exist); = != < >
//	create("lock") = "0"         its create revision (0: it does not exist)
//	mod("lock") = "42"           its mod revision: the revision of its last write
//	lease("lock") = "ID"         the lease it is attached to, as lease grant prints it (0: none)
//	value("config") != "v2"      its value, bytewise; = != < > (false if it does not exist)
//	exists("a")                  create("a") > "0"
//	missing("a")                 create("a") = "0"
//
//	put KEY VALUE [--lease ID] [--ignore-lease]
//	put KEY --ignore-value [--lease ID]   keep the value (the key must exist)
//	del KEY [END] [--prefix | --from-key] [--prev-kv]
//	get KEY [END] [--prefix | --from-key] [--limit N] [--keys-only] [--count-only]
//	    [--sort-by CREATE|KEY|MODIFY|VALUE|VERSION] [--order ASCEND|DESCEND]
//	    [--min-mod-revision N] [--max-mod-revision N] [--min-create-revision N] [--max-create-revision N]
//	txn {                        a nested transaction, in this same format, up to a line "}"
//
// (version, val, delete, c and m are accepted for ver, value, del, create
// and mod.) These are etcdctl's compares and operations with etcd's
// meanings; txn { ... } is kvd's own (etcdctl has no way to write a
// nested transaction). A key or value is a word without spaces or quotes,
// or a Go double-quoted string ("a b", "\x00\n"). Lines starting with #
// are comments.
const txnUsage = `txn: reads the transaction from standard input:
  compares, one a line:    ver("K") = "N" | create("K") = "N" | mod("K") = "N" | lease("K") = "ID" | value("K") != "V" | exists("K") | missing("K")   (= != < >)
  a blank line, then the operations if every compare holds:   put K V [--lease ID] [--ignore-lease] | put K --ignore-value | del K [END] [--prefix|--from-key] [--prev-kv] | get K [END] [--prefix|--from-key] [--limit N] [--keys-only] [--count-only] [--sort-by T] [--order O] [--min-mod-revision N]... | txn { (a nested txn, up to a line "}")
  a blank line, then the operations otherwise`

// maxTxnInput bounds what txn reads from standard input: a transaction
// is at most client.MaxTxnBytes encoded, and quoting at most quadruples a
// byte (\xNN).
const maxTxnInput = 4*client.MaxTxnBytes + 64<<10

var (
	compareLine = regexp.MustCompile(`^(version|ver|create|c|mod|m|lease|value|val)\((.*)\)\s*(!=|=|<|>)\s*([^=<>!].*)$`)
	existsLine  = regexp.MustCompile(`^(exists|missing)\((.*)\)$`)
)

// txnOp is a parsed operation, kept to print its result.
type txnOp struct {
	kind                string // "put", "del", "del-range", "get", "range", "txn"
	key                 string
	keysOnly, countOnly bool       // range
	sub                 [2][]txnOp // txn: its branches' operations
}

// parseTxn reads the line format from r.
func parseTxn(r io.Reader) (client.Txn, [2][]txnOp, error) {
	var t client.Txn
	var labels [2][]txnOp
	data, err := io.ReadAll(io.LimitReader(r, maxTxnInput+1))
	switch {
	case err != nil:
		return t, labels, fmt.Errorf("txn: reading standard input: %w", err)
	case len(data) > maxTxnInput:
		return t, labels, fmt.Errorf("txn: standard input is longer than %d bytes: %w", maxTxnInput, client.ErrBadRequest)
	}
	lines := strings.Split(string(data), "\n")
	if n := len(lines); n > 0 && lines[n-1] == "" {
		lines = lines[:n-1] // the newline ending the last line
	}
	t, labels, _, err = parseLines(lines, 0, 0)
	return t, labels, err
}

// maxTxnNesting bounds how deep kvctl nests txn { ... } (the server's
// operation limit bounds it anyway).
const maxTxnNesting = 32

// parseLines parses a transaction from lines[from:], up to the end or, if
// depth > 0, up to the line "}" that closes it; next is the line after.
func parseLines(lines []string, from, depth int) (t client.Txn, labels [2][]txnOp, next int, err error) {
	section := 0 // 0 compares, 1 then, 2 else
	fail := func(n int, msg string) (client.Txn, [2][]txnOp, int, error) {
		return t, labels, n, usageError{fmt.Sprintf("txn: line %d: %s; %s", n+1, msg, txnUsage)}
	}
	for n := from; n < len(lines); n++ {
		line := strings.TrimSpace(lines[n])
		switch {
		case strings.HasPrefix(line, "#"):
			continue
		case line == "}" && depth > 0:
			return t, labels, n + 1, nil
		case line == "":
			section++
			continue
		case section > 2:
			return fail(n, "more than three sections (compares, then, else)")
		case section == 0:
			c, err := parseCompare(line)
			if err != nil {
				return fail(n, err.Error())
			}
			t.If = append(t.If, c)
			continue
		}
		var op client.Op
		var label txnOp
		if line == "txn {" {
			if depth >= maxTxnNesting {
				return fail(n, fmt.Sprintf("txn { nested more than %d deep", maxTxnNesting))
			}
			sub, subLabels, end, err := parseLines(lines, n+1, depth+1)
			if err != nil {
				return t, labels, end, err
			}
			op, label, n = client.OpTxn(sub.If, sub.Then, sub.Else), txnOp{kind: "txn", sub: subLabels}, end-1
		} else if op, label, err = parseOp(line); err != nil {
			return fail(n, err.Error())
		}
		if section == 1 {
			t.Then = append(t.Then, op)
		} else {
			t.Else = append(t.Else, op)
		}
		labels[section-1] = append(labels[section-1], label)
	}
	if depth > 0 {
		return fail(len(lines)-1, "txn { without its closing }")
	}
	return t, labels, len(lines), nil
}

func parseCompare(line string) (client.Cmp, error) {
	if m := existsLine.FindStringSubmatch(line); m != nil {
		key, err := word(m[2])
		if err != nil {
			return client.Cmp{}, err
		}
		if m[1] == "exists" {
			return client.KeyExists([]byte(key)), nil
		}
		return client.KeyMissing([]byte(key)), nil
	}
	m := compareLine.FindStringSubmatch(line)
	if m == nil {
		return client.Cmp{}, fmt.Errorf("not a compare: %q", line)
	}
	key, err := word(m[2])
	if err != nil {
		return client.Cmp{}, err
	}
	operand, err := word(m[4])
	if err != nil {
		return client.Cmp{}, err
	}
	op := map[string]client.CmpOp{"=": client.CmpEqual, "!=": client.CmpNotEqual, "<": client.CmpLess, ">": client.CmpGreater}[m[3]]
	switch m[1] {
	case "value", "val":
		return client.CompareValue([]byte(key), op, []byte(operand)), nil
	case "lease":
		if operand == "0" {
			return client.CompareLease([]byte(key), op, 0), nil // no lease
		}
		id, err := parseLeaseID(operand)
		if err != nil {
			return client.Cmp{}, err
		}
		return client.CompareLease([]byte(key), op, id), nil
	}
	v, err := strconv.ParseUint(operand, 10, 64)
	if err != nil {
		return client.Cmp{}, fmt.Errorf("%s %q: want a non-negative integer", m[1], operand)
	}
	switch m[1] {
	case "create", "c":
		return client.CompareCreateRevision([]byte(key), op, v), nil
	case "mod", "m":
		return client.CompareModRevision([]byte(key), op, v), nil
	}
	return client.CompareVersion([]byte(key), op, v), nil
}

func parseOp(line string) (client.Op, txnOp, error) {
	f, err := words(line)
	if err != nil {
		return client.Op{}, txnOp{}, err
	}
	if len(f) == 0 {
		return client.Op{}, txnOp{}, fmt.Errorf("not an operation: %q", line)
	}
	verb := f[0]
	pos, flags, err := opFlags(f[1:])
	if err != nil {
		return client.Op{}, txnOp{}, fmt.Errorf("%s: %w", verb, err)
	}
	switch verb {
	case "put":
		return parsePut(pos, flags, line)
	case "del", "delete":
		return parseDel(pos, flags, line)
	case "get":
		return parseGet(pos, flags, line)
	}
	return client.Op{}, txnOp{}, fmt.Errorf("not an operation: %q", line)
}

// valueFlags are the operation flags that take a value.
var valueFlags = []string{"lease", "limit", "sort-by", "order",
	"min-mod-revision", "max-mod-revision", "min-create-revision", "max-create-revision"}

// opFlags splits an operation's words into positional ones and --flags
// (--name or --name=value; valueFlags take the next word).
func opFlags(words []string) (pos []string, flags map[string]string, err error) {
	flags = map[string]string{}
	for i := 0; i < len(words); i++ {
		w := words[i]
		if !strings.HasPrefix(w, "--") || len(w) == 2 {
			pos = append(pos, w)
			continue
		}
		name, value, hasValue := strings.Cut(w[2:], "=")
		if slices.Contains(valueFlags, name) && !hasValue {
			if i+1 >= len(words) {
				return nil, nil, fmt.Errorf("--%s needs a value", name)
			}
			i++
			value = words[i]
		}
		flags[name] = value
	}
	return pos, flags, nil
}

// only refuses flags not among allowed.
func only(flags map[string]string, verb string, allowed ...string) error {
	for name := range flags {
		if !slices.Contains(allowed, name) {
			return fmt.Errorf("%s does not take --%s in a txn (it takes --%s)", verb, name, strings.Join(allowed, ", --"))
		}
	}
	return nil
}

func parsePut(pos []string, flags map[string]string, line string) (client.Op, txnOp, error) {
	if err := only(flags, "put", "lease", "ignore-value", "ignore-lease"); err != nil {
		return client.Op{}, txnOp{}, err
	}
	var opts []client.WriteOption
	_, ignoreValue := flags["ignore-value"]
	if ignoreValue {
		opts = append(opts, client.WithIgnoreValue())
	}
	if _, ok := flags["ignore-lease"]; ok {
		opts = append(opts, client.WithIgnoreLease())
	}
	if v, ok := flags["lease"]; ok {
		id, err := parseLeaseID(v)
		if err != nil {
			return client.Op{}, txnOp{}, err
		}
		opts = append(opts, client.WithLease(id))
	}
	switch {
	case len(pos) == 2:
		return client.OpPut([]byte(pos[0]), []byte(pos[1]), opts...), txnOp{kind: "put", key: pos[0]}, nil
	case len(pos) == 1 && ignoreValue:
		return client.OpPut([]byte(pos[0]), nil, opts...), txnOp{kind: "put", key: pos[0]}, nil
	}
	return client.Op{}, txnOp{}, fmt.Errorf("not an operation: %q (put KEY VALUE, or put KEY --ignore-value)", line)
}

// rangeOf is a get's or del's range from KEY [END] --prefix --from-key:
// end nil and ranged false for KEY alone.
func rangeOf(pos []string, flags map[string]string, line string) (key, end []byte, ranged bool, err error) {
	_, prefix := flags["prefix"]
	_, fromKey := flags["from-key"]
	switch {
	case len(pos) == 0 || len(pos) > 2:
		return nil, nil, false, fmt.Errorf("not an operation: %q (KEY [END] [--prefix | --from-key])", line)
	case len(pos) == 2 && (prefix || fromKey), prefix && fromKey:
		return nil, nil, false, fmt.Errorf("give END, --prefix or --from-key, not two of them: %q", line)
	case prefix:
		return []byte(pos[0]), client.PrefixEnd([]byte(pos[0])), true, nil
	case fromKey:
		return []byte(pos[0]), nil, true, nil
	case len(pos) == 2:
		return []byte(pos[0]), []byte(pos[1]), true, nil
	}
	return []byte(pos[0]), nil, false, nil
}

func parseDel(pos []string, flags map[string]string, line string) (client.Op, txnOp, error) {
	if err := only(flags, "del", "prefix", "from-key", "prev-kv"); err != nil {
		return client.Op{}, txnOp{}, err
	}
	key, end, ranged, err := rangeOf(pos, flags, line)
	if err != nil {
		return client.Op{}, txnOp{}, err
	}
	_, prevKV := flags["prev-kv"]
	label := txnOp{kind: "del", key: pos[0]}
	if !ranged && !prevKV {
		return client.OpDelete(key), label, nil
	}
	if !ranged {
		end = append(key[:len(key):len(key)], 0) // one key, as a range, for its previous value
	}
	var opts []client.WriteOption
	if prevKV {
		opts = append(opts, client.WithPrevKV())
	}
	label.kind = "del-range"
	return client.OpDeleteRange(key, end, opts...), label, nil
}

func parseGet(pos []string, flags map[string]string, line string) (client.Op, txnOp, error) {
	if err := only(flags, "get", "prefix", "from-key", "limit", "keys-only", "count-only", "sort-by", "order",
		"min-mod-revision", "max-mod-revision", "min-create-revision", "max-create-revision"); err != nil {
		return client.Op{}, txnOp{}, err
	}
	key, end, ranged, err := rangeOf(pos, flags, line)
	if err != nil {
		return client.Op{}, txnOp{}, err
	}
	var opts []client.ReadOption
	if v, ok := flags["limit"]; ok {
		n, err := strconv.ParseUint(v, 10, 31)
		if err != nil {
			return client.Op{}, txnOp{}, fmt.Errorf("--limit %q: want a non-negative integer", v)
		}
		opts = append(opts, client.WithLimit(int(n)))
	}
	if _, ok := flags["keys-only"]; ok {
		opts = append(opts, client.WithKeysOnly())
	}
	if _, ok := flags["count-only"]; ok {
		opts = append(opts, client.WithCountOnly())
	}
	sortBy, hasSort := flags["sort-by"]
	order, hasOrder := flags["order"]
	if hasSort || hasOrder {
		sf := scanFlags{sortBy: optString{hasSort, sortBy}, order: optString{hasOrder, order}}
		t, o, err := sf.sort()
		if err != nil {
			return client.Op{}, txnOp{}, errors.New(err.Error())
		}
		opts = append(opts, client.WithSort(t, o))
	}
	for _, f := range []struct {
		name string
		opt  func(uint64) client.ReadOption
	}{{"min-mod-revision", client.WithMinModRev}, {"max-mod-revision", client.WithMaxModRev},
		{"min-create-revision", client.WithMinCreateRev}, {"max-create-revision", client.WithMaxCreateRev}} {
		if v, ok := flags[f.name]; ok {
			rev, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return client.Op{}, txnOp{}, fmt.Errorf("--%s %q: want a revision", f.name, v)
			}
			opts = append(opts, f.opt(rev))
		}
	}
	_, keysOnly := flags["keys-only"]
	_, countOnly := flags["count-only"]
	label := txnOp{kind: "get", key: pos[0], keysOnly: keysOnly, countOnly: countOnly}
	if !ranged && len(opts) == 0 {
		return client.OpGet(key), label, nil
	}
	if !ranged {
		end = append(key[:len(key):len(key)], 0)
	}
	label.kind = "range"
	return client.OpRange(key, end, opts...), label, nil
}

// words splits a line into words: runs of non-space characters, or Go
// double-quoted strings.
func words(line string) ([]string, error) {
	var out []string
	for line = strings.TrimSpace(line); line != ""; line = strings.TrimSpace(line) {
		var w string
		if line[0] == '"' {
			q, err := strconv.QuotedPrefix(line)
			if err != nil {
				return nil, fmt.Errorf("bad quoted string in %q", line)
			}
			w, _ = strconv.Unquote(q)
			line = line[len(q):]
		} else {
			i := strings.IndexAny(line, " \t")
			if i < 0 {
				i = len(line)
			}
			w, line = line[:i], line[i:]
			if strings.Contains(w, `"`) {
				return nil, fmt.Errorf("stray quote in %q", w)
			}
		}
		out = append(out, w)
	}
	return out, nil
}

// word is one word (see words).
func word(s string) (string, error) {
	w, err := words(s)
	if err != nil {
		return "", err
	}
	if len(w) != 1 {
		return "", fmt.Errorf("want one key or value, got %q", s)
	}
	return w[0], nil
}

// txnResult is a result as JSON shows it.
type txnResult struct {
	Op             string  `json:"op"`
	Key            string  `json:"key,omitempty"`
	KeyBase64      []byte  `json:"key_base64,omitempty"` // a key that is not UTF-8
	Found          *bool   `json:"found,omitempty"`
	Value          *string `json:"value,omitempty"` // a found get's, even empty
	ValueBase64    []byte  `json:"value_base64,omitempty"`
	ModRevision    uint64  `json:"mod_revision,omitempty"`
	CreateRevision uint64  `json:"create_revision,omitempty"`
	Version        uint64  `json:"version,omitempty"`
	Lease          string  `json:"lease,omitempty"`
	Deleted        *int64  `json:"deleted,omitempty"`  // del with a range or --prev-kv
	PrevKVs        []kv    `json:"prev_kvs,omitempty"` // del --prev-kv
	Count          *uint64 `json:"count,omitempty"`    // get with a range or options
	More           bool    `json:"more,omitempty"`
	KVs            []kv    `json:"kvs,omitempty"`
	Txn            *txnOut `json:"txn,omitempty"` // a nested transaction's response
}

// txnOut is a transaction's response as JSON shows it.
type txnOut struct {
	Succeeded bool        `json:"succeeded"`
	Revision  uint64      `json:"revision"`
	Results   []txnResult `json:"results"`
}

func runTxn(ctx context.Context, e *env, _ []string) error {
	if e.o.write == "raw" {
		return usageError{"txn: -w raw cannot separate results; use simple, json or table"}
	}
	t, labels, err := parseTxn(e.in)
	if err != nil {
		return err
	}
	r, err := e.c.Txn(ctx, t)
	if err != nil {
		return err
	}
	if e.o.write == "json" {
		return e.json(toTxnOut(r, labels))
	}
	w := bufio.NewWriter(e.out)
	printTxn(w, r, labels)
	return w.Flush()
}

func kvsOf(in []client.KV) []kv {
	var out []kv
	for _, x := range in {
		out = append(out, toKV(string(x.Key), x.Value, x.Meta))
	}
	return out
}

func toTxnOut(r *client.TxnResponse, labels [2][]txnOp) *txnOut {
	ran := labels[0]
	if !r.Succeeded {
		ran = labels[1]
	}
	out := &txnOut{Succeeded: r.Succeeded, Revision: r.Revision, Results: []txnResult{}}
	for i, res := range r.Results {
		op := ran[i]
		kv := toKV(op.key, res.Value, res.Meta)
		x := txnResult{Op: op.kind, Key: kv.Key, KeyBase64: kv.KeyBase64, ModRevision: res.ModRevision,
			CreateRevision: res.CreateRevision, Version: res.Version}
		if res.Lease != 0 {
			x.Lease = res.Lease.String()
		}
		switch op.kind {
		case "del", "get":
			x.Found = &res.Found
		case "del-range":
			x.Op, x.Deleted, x.PrevKVs = "del", &res.Deleted, kvsOf(res.KVs)
		case "range":
			x.Op, x.Count, x.More, x.KVs = "get", &res.Count, res.More, kvsOf(res.KVs)
		case "txn":
			x.Op, x.Txn = "txn", toTxnOut(res.Txn, op.sub)
		}
		if op.kind == "get" && res.Found {
			x.Value, x.ValueBase64 = kv.Value, kv.ValueBase64
		}
		out.Results = append(out.Results, x)
	}
	return out
}

// printTxn prints a transaction as etcdctl does: which branch ran, then
// each operation's result after a blank line (put: OK; del: how many keys
// it deleted, then with --prev-kv each deleted key and value on a line
// each; get: each key and its value on a line each, nothing if none; get
// --count-only: the count). A nested transaction prints the same way in
// its place.
func printTxn(w *bufio.Writer, r *client.TxnResponse, labels [2][]txnOp) {
	ran := labels[0]
	if !r.Succeeded {
		ran = labels[1]
	}
	fmt.Fprintln(w, map[bool]string{true: "SUCCESS", false: "FAILURE"}[r.Succeeded])
	for i, res := range r.Results {
		fmt.Fprintln(w)
		switch op := ran[i]; op.kind {
		case "put":
			fmt.Fprintln(w, "OK")
		case "del":
			fmt.Fprintln(w, map[bool]int{true: 1, false: 0}[res.Found])
		case "del-range":
			fmt.Fprintln(w, res.Deleted)
			for _, x := range res.KVs {
				fmt.Fprintf(w, "%s\n%s\n", x.Key, x.Value)
			}
		case "get":
			if res.Found {
				fmt.Fprintf(w, "%s\n%s\n", op.key, res.Value)
			}
		case "range":
			if op.countOnly {
				fmt.Fprintln(w, res.Count)
			}
			for _, x := range res.KVs {
				if op.keysOnly {
					fmt.Fprintf(w, "%s\n", x.Key)
				} else {
					fmt.Fprintf(w, "%s\n%s\n", x.Key, x.Value)
				}
			}
		case "txn":
			printTxn(w, res.Txn, op.sub)
		}
	}
}
