//go:build !rdma

package rdma

import (
	"errors"
	"testing"

	"github.com/kvd-project/kvd/transport"
)

func TestStubUnsupported(t *testing.T) {
	tr, err := New(Config{})
	if tr != nil || !errors.Is(err, transport.ErrUnsupported) {
		t.Fatalf("New = %v, %v; want nil, ErrUnsupported", tr, err)
	}
}
