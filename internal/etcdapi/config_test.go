package etcdapi_test

import (
	"errors"
	"testing"

	"github.com/kvd-project/kvd/internal/errs"
	"github.com/kvd-project/kvd/internal/etcdapi"
)

func TestNewRefusesConfigWithoutClient(t *testing.T) {
	if _, err := etcdapi.New(etcdapi.Config{}); !errors.Is(err, errs.ErrConfig) {
		t.Fatalf("New without a client: %v, want ErrConfig", err)
	}
}
