package tcp

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kvd-project/kvd/transport"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"zero", Config{}, true},
		{"all set", Config{MaxMessage: 1 << 30, Credits: 65535, MaxOutstandingReads: 65536, DialTimeout: time.Second, Node: "n1"}, true},
		{"negative MaxMessage", Config{MaxMessage: -1}, false},
		{"MaxMessage over 1 GiB", Config{MaxMessage: 1<<30 + 1}, false},
		{"negative Credits", Config{Credits: -1}, false},
		{"Credits over 65535", Config{Credits: 65536}, false},
		{"negative MaxOutstandingReads", Config{MaxOutstandingReads: -1}, false},
		{"MaxOutstandingReads over 65536", Config{MaxOutstandingReads: 65537}, false},
		{"negative DialTimeout", Config{DialTimeout: -time.Second}, false},
		{"Node too long", Config{Node: strings.Repeat("n", 256)}, false},
		{"limits set", Config{MaxConns: 5, HandshakeTimeout: time.Second, IdleTimeout: time.Minute, ReadTimeout: time.Second, WriteTimeout: time.Second}, true},
		{"limits off", Config{MaxConns: -1, IdleTimeout: -1, ReadTimeout: -1, WriteTimeout: -1}, true},
		{"negative HandshakeTimeout", Config{HandshakeTimeout: -time.Second}, false},
	}
	for _, tt := range tests {
		err := tt.cfg.Validate()
		if tt.ok != (err == nil) || (err != nil && !errors.Is(err, ErrConfig)) {
			t.Errorf("%s: Validate() = %v, want ok=%v or ErrConfig", tt.name, err, tt.ok)
		}
		if _, err := New(tt.cfg); !tt.ok && !errors.Is(err, ErrConfig) {
			t.Errorf("%s: New() = %v, want ErrConfig", tt.name, err)
		}
	}
}

func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	c := Config{}.withDefaults()
	want := Config{
		MaxMessage:          transport.DefaultMaxMessage,
		Credits:             transport.DefaultCredits,
		MaxOutstandingReads: DefaultMaxOutstandingReads,
		DialTimeout:         DefaultDialTimeout,
	}
	if c.MaxMessage != want.MaxMessage || c.Credits != want.Credits ||
		c.MaxOutstandingReads != want.MaxOutstandingReads || c.DialTimeout != want.DialTimeout {
		t.Errorf("defaults = %+v, want %+v", c, want)
	}
	if c.MaxConns != DefaultMaxConns || c.HandshakeTimeout != DefaultHandshakeTimeout || c.IdleTimeout != DefaultIdleTimeout ||
		c.ReadTimeout != DefaultReadTimeout || c.WriteTimeout != DefaultWriteTimeout {
		t.Errorf("limit defaults = %d, %v, %v, %v, %v", c.MaxConns, c.HandshakeTimeout, c.IdleTimeout, c.ReadTimeout, c.WriteTimeout)
	}
}
