package transport

import "testing"

func TestCheckAddr(t *testing.T) {
	for _, tc := range []struct {
		addr string
		ok   bool
	}{
		{"127.0.0.1:7000", true},
		{"node-1.example.com:65535", true},
		{"[::1]:7000", true},
		{"[fe80::1%eth0]:1", true},
		{"", false},
		{"node9", false},      // no port
		{":7000", false},      // no host
		{"host:", false},      // no port number
		{"host:0", false},     // port 0 is "any", not an address
		{"host:65536", false}, // beyond 16 bits
		{"host:http", false},  // named ports are not resolved
		{"::1:7000", false},   // IPv6 without brackets
		{"a:1,2=b:2", false},  // would read back as two members
		{"a=b:1", false},      // likewise
		{"host :1", false},    // a space
		{"host:07000", false}, // a second spelling of host:7000
		{string(make([]byte, MaxAddrLen+1)), false},
	} {
		err := CheckAddr(tc.addr)
		if (err == nil) != tc.ok {
			t.Errorf("CheckAddr(%q) = %v, want ok %v", tc.addr, err, tc.ok)
		}
	}
}

func TestSameAddr(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"127.0.0.1:7000", "127.0.0.1:7000", true},
		{"127.0.0.1:7000", "127.0.0.1:7001", false},
		{"[::1]:7000", "[0:0::1]:7000", true},
		{"[::ffff:127.0.0.1]:7000", "127.0.0.1:7000", true},
		{"[::1]:7000", "127.0.0.1:7000", false},
		{"Node-1.example.com:1", "node-1.EXAMPLE.com:1", true},
		{"node-1:1", "node-2:1", false},
	} {
		if got := SameAddr(tc.a, tc.b); got != tc.same {
			t.Errorf("SameAddr(%q, %q) = %t, want %t", tc.a, tc.b, got, tc.same)
		}
	}
}
