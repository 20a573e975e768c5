package server

import (
	"testing"
	"time"
)

// TestConfigWatchProgressNotifyInterval: etcd's default, and a minimum a
// knob may go below.
func TestConfigWatchProgressNotifyInterval(t *testing.T) {
	t.Parallel()
	base := Config{Listen: "x", DataDir: "d", Transport: limitless{}}
	if got := base.withDefaults().progressNotifyInterval(); got != DefaultWatchProgressNotifyInterval {
		t.Errorf("default %v, want %v", got, DefaultWatchProgressNotifyInterval)
	}
	for _, tc := range []struct {
		d  time.Duration
		ok bool
	}{{0, true}, {time.Second, true}, {time.Hour, true}, {10 * time.Millisecond, false}, {-time.Second, false}} {
		c := base
		c.WatchProgressNotifyInterval = tc.d
		if err := c.Validate(); (err == nil) != tc.ok {
			t.Errorf("interval %v: Validate() = %v", tc.d, err)
		}
	}
	c := base
	c.Knobs.WatchProgressNotifyInterval = 10 * time.Millisecond
	if err := c.Validate(); err != nil || c.withDefaults().progressNotifyInterval() != 10*time.Millisecond {
		t.Errorf("knob of 10ms: %v, interval %v", err, c.withDefaults().progressNotifyInterval())
	}
}
