package transport

import (
	"fmt"
	"net"
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
	}
	return nil
}
