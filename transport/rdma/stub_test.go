//go:build !rdma

package rdma

import (
	"errors"
	"strings"
	"testing"

	"github.com/kvd-project/kvd/transport"
)

func TestStubUnsupported(t *testing.T) {
	tr, err := New(Config{})
	if tr != nil || !errors.Is(err, transport.ErrUnsupported) {
		t.Fatalf("New = %v, %v; want nil, ErrUnsupported", tr, err)
	}
}

// The stub takes the same Config, Auth included, and still says how to get
// RDMA support.
func TestStubAcceptsAuth(t *testing.T) {
	tr, err := New(Config{Auth: &Auth{Keys: testKeys(), Name: "node-1"}})
	if tr != nil || !errors.Is(err, transport.ErrUnsupported) || !strings.Contains(err.Error(), "build with -tags rdma") {
		t.Fatalf("New = %v, %v; want nil and the build-tag error", tr, err)
	}
	if st := (&Transport{}).AuthStats(); st != (AuthStats{}) {
		t.Fatalf("AuthStats = %+v", st)
	}
	// A bad Auth is still reported as such.
	if _, err := New(Config{Auth: &Auth{}}); !errors.Is(err, ErrConfig) {
		t.Fatalf("New with an empty Auth = %v; want ErrConfig", err)
	}
}
