package kvdtest

import (
	"net"
	"strconv"
	"testing"
)

// TestFreeAddrsAvoidTheEphemeralRange: the addresses are distinct, free,
// and below the range outgoing connections take their ports from.
func TestFreeAddrsAvoidTheEphemeralRange(t *testing.T) {
	lo, _ := ephemeralRange()
	if lo-lowestPort < 1000 {
		t.Skipf("SKIPPED: this machine's ephemeral range starts at %d, leaving no room below it", lo)
	}
	addrs := FreeAddrs(t, 20)
	seen := map[string]bool{}
	for _, a := range addrs {
		if seen[a] {
			t.Fatalf("%s handed out twice in %v", a, addrs)
		}
		seen[a] = true
		_, ps, err := net.SplitHostPort(a)
		if err != nil {
			t.Fatal(err)
		}
		if p, _ := strconv.Atoi(ps); p < lowestPort || p >= lo {
			t.Errorf("%s: port outside [%d, %d)", a, lowestPort, lo)
		}
		ln, err := net.Listen("tcp", a)
		if err != nil {
			t.Errorf("%s is not free: %v", a, err)
			continue
		}
		ln.Close()
	}
}
