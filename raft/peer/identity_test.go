package peer

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
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

// TestSettleClusterID: a new store records the id its token and members
// derive; a restart with other ones is refused, naming both clusters; a
// joining node takes the stored id, or none.
func TestSettleClusterID(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	st := openStore(t)
	peers := map[uint64]string{1: "a", 2: "b"}
	if id, err := SettleClusterID(st, Cluster{Join: true}, log); id != 0 || err != nil {
		t.Fatalf("joining with nothing stored: %x, %v", id, err)
	}
	want := ClusterIDFor("tok", peers)
	if id, err := SettleClusterID(st, Cluster{Token: "tok", Peers: peers}, log); id != want || err != nil {
		t.Fatalf("new store: %x, %v; want %x", id, err, want)
	}
	if id := st.ClusterID(); id != want {
		t.Fatalf("stored %x, want %x", id, want)
	}
	if id, err := SettleClusterID(st, Cluster{Token: "tok", Peers: peers}, log); id != want || err != nil {
		t.Fatalf("restart: %x, %v", id, err)
	}
	_, err := SettleClusterID(st, Cluster{Token: "other", Peers: peers}, log)
	if !errors.Is(err, ErrClusterMismatch) || !strings.Contains(err.Error(), fmt.Sprintf("%016x", want)) {
		t.Fatalf("restart with another token: %v", err)
	}
	if id, err := SettleClusterID(st, Cluster{Join: true}, log); id != want || err != nil {
		t.Fatalf("joining with an id stored: %x, %v", id, err)
	}
}
