package transporttest

import (
	"context"

	"github.com/kvd-project/kvd/transport"
)

// Echo sends every message conn receives straight back, until ctx ends or
// the connection fails. Transports' round-trip benchmarks run it as the
// peer; it reuses one buffer, so it adds no allocations to what they measure.
func Echo(ctx context.Context, conn transport.Conn, bufSize int) {
	buf := make([]byte, 0, bufSize)
	for {
		var err error
		if buf, err = conn.Recv(ctx, buf); err != nil {
			return
		}
		if conn.Send(ctx, buf) != nil {
			return
		}
	}
}
