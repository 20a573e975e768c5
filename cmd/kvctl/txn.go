package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"regexp"
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
//	put KEY VALUE
//	put KEY VALUE --lease ID     attached to lease ID
//	del KEY
//	get KEY
//
// (version, val and delete are accepted for ver, value and del.) These are
// etcdctl's compares with etcd's meanings. A key or
// value is a word without spaces or quotes, or a Go double-quoted string
// ("a b", "\x00\n"). Lines starting with # are comments.
const txnUsage = `txn: reads the transaction from standard input:
  compares, one a line:    ver("K") = "N" | create("K") = "N" | mod("K") = "N" | lease("K") = "ID" | value("K") != "V" | exists("K") | missing("K")   (= != < >)
  a blank line, then the operations if every compare holds:   put K V [--lease ID] | del K | get K
  a blank line, then the operations otherwise`

// maxTxnInput bounds what txn reads from standard input: a transaction
// is at most client.MaxTxnBytes encoded, and quoting at most quadruples a
// byte (\xNN).
const maxTxnInput = 4*client.MaxTxnBytes + 64<<10

var (
	compareLine = regexp.MustCompile(`^(version|ver|create|mod|lease|value|val)\((.*)\)\s*(!=|=|<|>)\s*([^=<>!].*)$`)
	existsLine  = regexp.MustCompile(`^(exists|missing)\((.*)\)$`)
)

// txnOp is a parsed operation, kept to print its result.
type txnOp struct {
	kind string // "put", "del", "get"
	key  string
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
	section := 0 // 0 compares, 1 then, 2 else
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	sc.Buffer(make([]byte, 64<<10), maxTxnInput)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "#"):
			continue
		case line == "":
			section++
			continue
		case section > 2:
			return t, labels, usageError{fmt.Sprintf("txn: line %d: more than three sections (compares, then, else); %s", n, txnUsage)}
		case section == 0:
			c, err := parseCompare(line)
			if err != nil {
				return t, labels, usageError{fmt.Sprintf("txn: line %d: %v; %s", n, err, txnUsage)}
			}
			t.If = append(t.If, c)
		default:
			op, label, err := parseOp(line)
			if err != nil {
				return t, labels, usageError{fmt.Sprintf("txn: line %d: %v; %s", n, err, txnUsage)}
			}
			if section == 1 {
				t.Then = append(t.Then, op)
			} else {
				t.Else = append(t.Else, op)
			}
			labels[section-1] = append(labels[section-1], label)
		}
	}
	if err := sc.Err(); err != nil {
		return t, labels, fmt.Errorf("txn: reading standard input: %w", err)
	}
	return t, labels, nil
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
	case "create":
		return client.CompareCreateRevision([]byte(key), op, v), nil
	case "mod":
		return client.CompareModRevision([]byte(key), op, v), nil
	}
	return client.CompareVersion([]byte(key), op, v), nil
}

func parseOp(line string) (client.Op, txnOp, error) {
	f, err := words(line)
	if err != nil {
		return client.Op{}, txnOp{}, err
	}
	switch {
	case len(f) == 3 && f[0] == "put":
		return client.OpPut([]byte(f[1]), []byte(f[2])), txnOp{"put", f[1]}, nil
	case len(f) == 5 && f[0] == "put" && f[3] == "--lease":
		id, err := parseLeaseID(f[4])
		if err != nil {
			return client.Op{}, txnOp{}, err
		}
		return client.OpPutLease([]byte(f[1]), []byte(f[2]), id), txnOp{"put", f[1]}, nil
	case len(f) == 2 && (f[0] == "del" || f[0] == "delete"):
		return client.OpDelete([]byte(f[1])), txnOp{"del", f[1]}, nil
	case len(f) == 2 && f[0] == "get":
		return client.OpGet([]byte(f[1])), txnOp{"get", f[1]}, nil
	}
	return client.Op{}, txnOp{}, fmt.Errorf("not an operation: %q", line)
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
	ran := labels[0]
	if !r.Succeeded {
		ran = labels[1]
	}
	if e.o.write == "json" {
		out := struct {
			Succeeded bool        `json:"succeeded"`
			Revision  uint64      `json:"revision"`
			Results   []txnResult `json:"results"`
		}{r.Succeeded, r.Revision, []txnResult{}}
		for i, res := range r.Results {
			kv := toKV(ran[i].key, res.Value, res.Meta)
			x := txnResult{Op: ran[i].kind, Key: kv.Key, KeyBase64: kv.KeyBase64, ModRevision: res.ModRevision,
				CreateRevision: res.CreateRevision, Version: res.Version}
			if res.Lease != 0 {
				x.Lease = res.Lease.String()
			}
			if ran[i].kind != "put" {
				x.Found = &res.Found
			}
			if ran[i].kind == "get" && res.Found {
				x.Value, x.ValueBase64 = kv.Value, kv.ValueBase64
			}
			out.Results = append(out.Results, x)
		}
		return e.json(out)
	}
	// As etcdctl prints a transaction: which branch ran, then each
	// operation's result (put: OK; del: how many keys it deleted; get: the
	// key and its value on a line each, nothing if it does not exist).
	w := bufio.NewWriter(e.out)
	fmt.Fprintln(w, map[bool]string{true: "SUCCESS", false: "FAILURE"}[r.Succeeded])
	for i, res := range r.Results {
		fmt.Fprintln(w)
		switch ran[i].kind {
		case "put":
			fmt.Fprintln(w, "OK")
		case "del":
			fmt.Fprintln(w, map[bool]int{true: 1, false: 0}[res.Found])
		case "get":
			if res.Found {
				fmt.Fprintf(w, "%s\n%s\n", ran[i].key, res.Value)
			}
		}
	}
	return w.Flush()
}
