package transport

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// MaxAddrLen bounds an address: a DNS name (253 bytes), a colon and a port.
const MaxAddrLen = 260

// CheckAddr reports why addr cannot be an address Listen or Dial takes:
// it must be "host:port" (an IPv6 host in brackets) with a host and a
// numeric port in 1..65535. Spaces, commas and '=' are refused too: member
// lists are written "id=addr,id=addr", and an address holding one would
// read back as another list. It does not resolve the host.
func CheckAddr(addr string) error {
	if len(addr) > MaxAddrLen {
		return fmt.Errorf("address of %d bytes (at most %d)", len(addr), MaxAddrLen)
	}
	if strings.ContainsAny(addr, " \t\r\n,=") {
		return fmt.Errorf("address %q holds a space, comma or '='", addr)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("address %q: want host:port", addr)
	}
	if host == "" {
		return fmt.Errorf("address %q has no host", addr)
	}
	if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
		return fmt.Errorf("address %q: port must be a number in 1..65535", addr)
	} else if strconv.FormatUint(p, 10) != port {
		// Dialers read "07301" as 7301: two spellings of one address
		// would pass as two members' (SameAddr).
		return fmt.Errorf("address %q: port must be written without leading zeros", addr)
	}
	return nil
}

// SameAddr reports whether a and b, both passing CheckAddr, name the same
// address: ports equal, hosts equal ignoring case, or equal as IP
// addresses however written ("::1" and "0:0::1").
func SameAddr(a, b string) bool {
	ha, pa, errA := net.SplitHostPort(a)
	hb, pb, errB := net.SplitHostPort(b)
	if errA != nil || errB != nil {
		return a == b
	}
	if pa != pb {
		return false
	}
	ipa, errA := netip.ParseAddr(ha)
	ipb, errB := netip.ParseAddr(hb)
	if errA == nil && errB == nil {
		return ipa.Unmap() == ipb.Unmap()
	}
	return strings.EqualFold(ha, hb)
}
