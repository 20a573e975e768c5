package kvdtest

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// lowestPort is the lowest port FreeAddrs hands out: below it sit the
// well-known and registered services a machine may run.
const lowestPort = 10000

// FreeAddrs returns n distinct loopback addresses whose ports were free a
// moment ago. The ports come from below the kernel's ephemeral range when
// there is room: a port from that range (what listening on port 0 gives)
// can be taken, between the check and the test's own listen, by any
// outgoing connection of another test running beside this one. Below the
// range only another listener can take it, and the random pick makes two
// tests choosing the same port unlikely.
func FreeAddrs(t testing.TB, n int) []string {
	t.Helper()
	lo, _ := ephemeralRange()
	out := make([]string, 0, n)
	held := make([]net.Listener, 0, n) // held until all are picked: no duplicates
	defer func() {
		for _, ln := range held {
			ln.Close()
		}
	}()
	for tries := 0; len(out) < n; tries++ {
		port := 0
		if lo-lowestPort >= 1000 && tries < 100*n {
			port = lowestPort + rand.IntN(lo-lowestPort)
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			if port != 0 {
				continue // taken: pick another
			}
			t.Fatal(err)
		}
		held = append(held, ln)
		out = append(out, ln.Addr().String())
	}
	return out
}

// ephemeralRange reads the kernel's range of ports for outgoing
// connections; Linux's default when it cannot be read.
func ephemeralRange() (lo, hi int) {
	lo, hi = 32768, 60999
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return lo, hi
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return lo, hi
	}
	l, err1 := strconv.Atoi(f[0])
	h, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil || l > h {
		return lo, hi
	}
	return l, h
}
