package etcdapi

import (
	"errors"
	"testing"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/errs"
)

// TestStreamWorkersOption checks that the gRPC server gets reused stream
// workers by default (a call then neither starts a goroutine nor grows its
// stack), none when asked for none, and that Validate bounds their number.
func TestStreamWorkersOption(t *testing.T) {
	none := (&Server{cfg: Config{StreamWorkers: -1}}).ServerOptions()
	for _, tc := range []struct {
		name        string
		workers     int
		wantWorkers int // after defaults
		wantErr     bool
		wantOption  bool
	}{
		{"default", 0, DefaultStreamWorkers, false, true},
		{"set", 8, 8, false, true},
		{"none", -1, -1, false, false},
		{"too many", maxStreamWorkers + 1, maxStreamWorkers + 1, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Client: &client.Client{}, StreamWorkers: tc.workers}.withDefaults()
			if cfg.StreamWorkers != tc.wantWorkers {
				t.Fatalf("StreamWorkers after defaults: %d, want %d", cfg.StreamWorkers, tc.wantWorkers)
			}
			if err := cfg.Validate(); errors.Is(err, errs.ErrConfig) != tc.wantErr {
				t.Fatalf("Validate: %v, want an error: %v", err, tc.wantErr)
			}
			opts := (&Server{cfg: cfg}).ServerOptions()
			if got := len(opts) > len(none); got != tc.wantOption {
				t.Fatalf("NumStreamWorkers among the server options: %v, want %v", got, tc.wantOption)
			}
		})
	}
}
