package main_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// normaliser rewrites what one side of the differential test printed so
// that only behaviour is left to compare: ids (cluster, member, lease),
// raft terms and indexes, and absolute revisions, shown as offsets from
// the revision the script started at ("r+3"). Nothing else is rewritten.
type normaliser struct {
	base      int64             // the store revision the script started at
	endpoints []string          // this side's host:ports, shown as <endpoint>
	ids       map[string]string // ids seen (hex and decimal) -> their names
}

// revisionKeys are the JSON fields that hold store revisions.
var revisionKeys = map[string]bool{
	"revision": true, "create_revision": true, "mod_revision": true, "compact_revision": true, "hash_revision": true,
	"CompactRevision": true, // etcdctl watch -w json
}

// idKeys are the JSON fields that hold ids, and what stands for them.
var idKeys = map[string]string{
	"cluster_id": "<cluster>", "member_id": "<member>", "leader": "<member>", "ID": "<id>", "id": "<id>", "lease": "<id>",
	"raft_term": "<term>", "raft_index": "<index>", "raft_applied_index": "<index>",
}

var (
	compactedRevisionRE = regexp.MustCompile(`compacted revision (\d+)`)
	clientLogRE         = regexp.MustCompile(`^\{"level":`)
)

// addID names an id the script learned (a lease it granted): its hex and
// decimal forms are shown as name wherever they appear.
func (n *normaliser) addID(hex, name string) {
	if n.ids == nil {
		n.ids = map[string]string{}
	}
	n.ids[hex] = name
	if v, err := strconv.ParseUint(hex, 16, 64); err == nil {
		n.ids[strconv.FormatUint(v, 10)] = name
	}
}

// rev shows revision v as an offset from the base; 0 (none) stays 0.
func (n *normaliser) rev(v int64) string {
	if v == 0 {
		return "0"
	}
	return fmt.Sprintf("r%+d", v-n.base)
}

// text normalises a whole output: line by line, JSON lines as JSON.
// etcdctl's own log lines (zap JSON with timestamps, on stderr) say what
// the client did, not the server, and are dropped.
func (n *normaliser) text(s string) string {
	var out []string
	for _, line := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		if clientLogRE.MatchString(line) {
			continue
		}
		out = append(out, n.line(line))
	}
	return strings.Join(out, "\n")
}

// line normalises one line of output.
func (n *normaliser) line(line string) string {
	if strings.HasPrefix(line, "{") {
		if j, ok := n.json([]byte(line)); ok {
			return j
		}
	}
	line = compactedRevisionRE.ReplaceAllStringFunc(line, func(m string) string {
		v, _ := strconv.ParseInt(compactedRevisionRE.FindStringSubmatch(m)[1], 10, 64)
		return "compacted revision " + n.rev(v)
	})
	for _, ep := range n.endpoints {
		line = strings.ReplaceAll(line, ep, "<endpoint>")
	}
	for id, name := range n.ids {
		line = regexp.MustCompile(`\b`+id+`\b`).ReplaceAllString(line, name)
	}
	return line
}

// json normalises one JSON document, and prints it with sorted keys.
func (n *normaliser) json(b []byte) (string, bool) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil || d.More() {
		return "", false
	}
	var out strings.Builder
	e := json.NewEncoder(&out)
	e.SetEscapeHTML(false)
	if err := e.Encode(n.walk("", v)); err != nil {
		return "", false
	}
	return strings.TrimSuffix(out.String(), "\n"), true
}

// walk normalises v, the value of field key.
func (n *normaliser) walk(key string, v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = n.walk(k, e)
		}
		return v
	case []any:
		for i, e := range v {
			v[i] = n.walk(key, e)
		}
		return v
	case json.Number:
		return n.number(key, v.String(), v)
	case string: // protojson prints 64-bit integers as strings
		return n.number(key, v, v)
	}
	return v
}

// number normalises the integer s of field key; orig is returned if the
// field holds neither a revision nor an id.
func (n *normaliser) number(key, s string, orig any) any {
	x, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		u, uerr := strconv.ParseUint(s, 10, 64)
		if uerr != nil {
			return orig
		}
		x = int64(u)
	}
	switch {
	case revisionKeys[key]:
		return n.rev(x)
	case idKeys[key] != "" && x != 0:
		if name, ok := n.ids[s]; ok {
			return name
		}
		return idKeys[key]
	}
	return orig
}

// TestDiffNormaliserRewritesOnlyIDsAndRevisions: revisions become offsets
// from the base, ids their names, and nothing else changes.
func TestDiffNormaliserRewritesOnlyIDsAndRevisions(t *testing.T) {
	n := &normaliser{base: 10, endpoints: []string{"127.0.0.1:2379"}}
	n.addID("1f", "<lease1>")
	for _, c := range []struct{ in, want string }{
		{`OK`, `OK`},
		{`compacted revision 14`, `compacted revision r+4`},
		{`lease 1f granted with TTL(60s)`, `lease <lease1> granted with TTL(60s)`},
		{`lease 1f0 granted`, `lease 1f0 granted`},
		{`{"header":{"cluster_id":123,"member_id":9,"revision":12,"raft_term":3},"kvs":[{"key":"YQ==","create_revision":11,"mod_revision":12,"version":2,"lease":31}],"count":1}`,
			`{"count":1,"header":{"cluster_id":"<cluster>","member_id":"<member>","raft_term":"<term>","revision":"r+2"},"kvs":[{"create_revision":"r+1","key":"YQ==","lease":"<lease1>","mod_revision":"r+2","version":2}]}`},
		{`{"header":{"revision":"12"},"count":"3","more":true}`, `{"count":"3","header":{"revision":"r+2"},"more":true}`},
		{`{"compact_revision":0,"lease":0}`, `{"compact_revision":"0","lease":0}`},
		{`{"level":"warn","ts":"2026-12-02T16:00:00Z","msg":"retrying"}` + "\nError: context deadline exceeded at 127.0.0.1:2379",
			`Error: context deadline exceeded at <endpoint>`},
		{`a revision 12 in text`, `a revision 12 in text`},
	} {
		if got := n.text(c.in); got != c.want {
			t.Errorf("normalise %q:\n got %s\nwant %s", c.in, got, c.want)
		}
	}
}
