package peer

import (
	"maps"
	"testing"
)

// TestClusterIDFor checks the derivation every initial member does on its
// own: the same from the same token and members whatever the map order,
// different if anything differs, never 0.
func TestClusterIDFor(t *testing.T) {
	peers := map[uint64]string{1: "10.0.0.1:7301", 2: "10.0.0.2:7301", 3: "10.0.0.3:7301"}
	base := ClusterIDFor("tok", peers)
	if base == 0 {
		t.Fatal("cluster id 0")
	}
	for range 20 { // map iteration order varies from call to call
		if id := ClusterIDFor("tok", maps.Clone(peers)); id != base {
			t.Fatalf("same cluster, id %x then %x", base, id)
		}
	}
	if ClusterIDFor("", peers) != ClusterIDFor(DefaultClusterToken, peers) {
		t.Fatal("the empty token is not the default one")
	}
	change := func(f func(p map[uint64]string)) map[uint64]string {
		p := maps.Clone(peers)
		f(p)
		return p
	}
	others := map[string]uint64{
		"another token":    ClusterIDFor("tok2", peers),
		"another address":  ClusterIDFor("tok", change(func(p map[uint64]string) { p[2] = "10.0.0.9:7301" })),
		"another id":       ClusterIDFor("tok", change(func(p map[uint64]string) { p[4] = p[3]; delete(p, 3) })),
		"an extra member":  ClusterIDFor("tok", change(func(p map[uint64]string) { p[4] = "10.0.0.4:7301" })),
		"a missing member": ClusterIDFor("tok", change(func(p map[uint64]string) { delete(p, 3) })),
		// Token and addresses are length-prefixed: no shifting bytes
		// between them gives the same input.
		"token/address boundary": ClusterIDFor("tok1", map[uint64]string{1: "0.0.0.1:7301", 2: "10.0.0.2:7301", 3: "10.0.0.3:7301"}),
	}
	for name, id := range others {
		if id == base || id == 0 {
			t.Errorf("%s: cluster id %x (base %x)", name, id, base)
		}
	}
}
