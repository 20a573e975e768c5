//go:build !rdma

package rdma

import (
	"context"
	"fmt"

	"github.com/kvd-project/kvd/transport"
)

var errNotBuilt = fmt.Errorf("rdma: built without RDMA support; build with -tags rdma (needs libibverbs-dev and librdmacm-dev): %w",
	transport.ErrUnsupported)

// Transport is an RDMA device context. In this build (without the "rdma" tag)
// none can be created.
type Transport struct{}

var _ transport.Transport = (*Transport)(nil)

// New fails in this build with an error wrapping transport.ErrUnsupported.
func New(cfg Config) (*Transport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return nil, errNotBuilt
}

func (*Transport) Register(int) (transport.Region, error)    { return nil, errNotBuilt }
func (*Transport) Listen(string) (transport.Listener, error) { return nil, errNotBuilt }
func (*Transport) Dial(context.Context, string) (transport.Conn, error) {
	return nil, errNotBuilt
}
func (*Transport) Name() string { return "rdma" }
func (*Transport) Close() error { return nil }

// AuthStats is always zero in this build.
func (*Transport) AuthStats() AuthStats { return AuthStats{} }

// Pinned is always zero in this build.
func (*Transport) Pinned() Pinned { return Pinned{} }
