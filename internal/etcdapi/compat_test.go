package etcdapi_test

import (
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// compatDoc is the page that must name every RPC and request field.
const compatDoc = "../../docs/etcd-compatibility.md"

// compatStatuses are the answers the page may give for a row.
var compatStatuses = map[string]bool{"supported": true, "differs": true, "not supported": true}

// rowRE matches a table row whose first cell names an RPC or field.
var rowRE = regexp.MustCompile("^\\| `([A-Za-z0-9_.]+)` \\| ([a-z ]+) \\|")

// etcdNames lists etcd's v3 RPCs as Service.Method and the fields of their
// requests (and of the messages inside them) as Message.field, from the
// services' descriptors.
func etcdNames() []string {
	var names []string
	seen := map[protoreflect.FullName]bool{}
	var walk func(m protoreflect.MessageDescriptor)
	walk = func(m protoreflect.MessageDescriptor) {
		if seen[m.FullName()] {
			return
		}
		seen[m.FullName()] = true
		fs := m.Fields()
		for i := range fs.Len() {
			f := fs.Get(i)
			names = append(names, string(m.Name())+"."+string(f.Name()))
			if f.Message() != nil {
				walk(f.Message())
			}
		}
	}
	ss := pb.File_rpc_proto.Services()
	for i := range ss.Len() {
		s := ss.Get(i)
		ms := s.Methods()
		for j := range ms.Len() {
			m := ms.Get(j)
			names = append(names, string(s.Name())+"."+string(m.Name()))
			walk(m.Input())
		}
	}
	return names
}

// docRows reads the page's rows: name to status.
func docRows(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(compatDoc)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for i, line := range strings.Split(string(b), "\n") {
		m := rowRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if _, dup := rows[m[1]]; dup {
			t.Errorf("line %d: %s has a second row", i+1, m[1])
		}
		if !compatStatuses[m[2]] {
			t.Errorf("line %d: %s: status %q is none of supported, differs, not supported", i+1, m[1], m[2])
		}
		rows[m[1]] = m[2]
	}
	return rows
}

// TestCompatibilityDocCoversEveryRPCAndField: docs/etcd-compatibility.md
// has a row for every RPC of etcd's six services and every request field,
// and none for a name etcd does not have.
func TestCompatibilityDocCoversEveryRPCAndField(t *testing.T) {
	rows := docRows(t)
	names := etcdNames()
	if len(names) < 100 {
		t.Fatalf("found only %d RPCs and fields in etcd's descriptors", len(names))
	}
	known := map[string]bool{}
	for _, n := range names {
		known[n] = true
		if _, ok := rows[n]; !ok {
			t.Errorf("%s has no row in docs/etcd-compatibility.md", n)
		}
	}
	var stale []string
	for n := range rows {
		if !known[n] {
			stale = append(stale, n)
		}
	}
	sort.Strings(stale)
	for _, n := range stale {
		t.Errorf("docs/etcd-compatibility.md has a row for %s, which etcd's API does not have", n)
	}
}

// TestCompatibilityDocCoversEveryService: the six services are all there,
// RangeStream and Downgrade included (the walk above would pass on an
// empty descriptor set).
func TestCompatibilityDocCoversEveryService(t *testing.T) {
	rows := docRows(t)
	for _, rpc := range []string{"KV.Range", "KV.RangeStream", "Watch.Watch", "Lease.LeaseGrant", "Cluster.MemberList",
		"Maintenance.Downgrade", "Auth.AuthStatus"} {
		if _, ok := rows[rpc]; !ok {
			t.Errorf("%s has no row", rpc)
		}
	}
	if got := pb.File_rpc_proto.Services().Len(); got != 6 {
		t.Errorf("etcd's API has %d services, the page covers 6", got)
	}
}
