package peer

import (
	"errors"
	"testing"
	"time"
)

func TestConfigDefaultsAndValidate(t *testing.T) {
	full := Config{ID: 1, Transport: dialer{}, Store: openStore(t), Host: newFakeHost()}
	if err := full.Validate(); err != nil {
		t.Fatal(err)
	}
	c := full.withDefaults()
	if c.Knobs.SnapshotFrameTimeout != time.Minute || c.QueueSize != DefaultQueueSize || c.Metrics == nil || c.Logger == nil {
		t.Fatalf("defaults: %+v", c)
	}
	for name, bad := range map[string]func(c *Config){
		"no id":            func(c *Config) { c.ID = 0 },
		"no host":          func(c *Config) { c.Host = nil },
		"no store":         func(c *Config) { c.Store = nil },
		"no transport":     func(c *Config) { c.Transport = nil },
		"negative queue":   func(c *Config) { c.QueueSize = -1 },
		"negative timeout": func(c *Config) { c.Knobs.SnapshotFrameTimeout = -time.Second },
	} {
		c := full
		bad(&c)
		if err := c.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: Validate = %v", name, err)
		}
	}
}
