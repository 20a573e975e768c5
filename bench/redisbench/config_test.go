package redisbench

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestValidateRefusesBadConfig: every unusable setting is an ErrConfig.
func TestValidateRefusesBadConfig(t *testing.T) {
	ok := Config{Bin: "bin", Kvbench: "kvbench"}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		ok   bool
	}{
		{"defaults", func(*Config) {}, true},
		{"redis only needs no kvd", func(c *Config) { c.Bin, c.Targets = "", []string{Redis, RedisAOF} }, true},
		{"kvd without bin", func(c *Config) { c.Bin = "" }, false},
		{"go-floor without kvbench", func(c *Config) { c.Kvbench = "" }, false},
		{"no go-floor needs no kvbench", func(c *Config) { c.Kvbench, c.Targets = "", []string{Gateway, Redis} }, true},
		{"negative clients", func(c *Config) { c.Clients = -1 }, false},
		{"ten nodes", func(c *Config) { c.Nodes = 10 }, false},
		{"negative keyspace", func(c *Config) { c.Keyspace = -1 }, false},
		{"pipeline 0", func(c *Config) { c.Pipelines = []int{1, 0} }, false},
		{"two tests in one", func(c *Config) { c.Tests = []string{"set,get"} }, false},
		{"unknown target", func(c *Config) { c.Targets = []string{"memcached"} }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.edit(&c)
			err := c.Validate()
			if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrConfig)) {
				t.Errorf("Validate = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

// TestResolveRedisServerLinksRedisCheckRDB: without a redis-server in
// PATH, redis-tools' redis-check-rdb is linked under that name (the name
// makes it the server), and the version line is checked and shortened.
func TestResolveRedisServerLinksRedisCheckRDB(t *testing.T) {
	for _, tc := range []struct {
		name, script, ver string
		ok                bool
	}{
		{"acts as the server by name", `case $0 in */redis-server) echo "Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc-5.3.0 bits=64";; *) echo "redis-check-rdb";; esac`,
			"Redis server v=7.0.15", true},
		{"not a redis server", `echo "something else 1.0"`, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, dir := t.TempDir(), t.TempDir()
			if err := os.WriteFile(filepath.Join(path, "redis-check-rdb"), []byte("#!/bin/sh\n"+tc.script+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			// Only the stand-in: its #!/bin/sh needs no PATH, and a
			// redis-server installed on the machine stays out of sight.
			t.Setenv("PATH", path)
			bin, ver, err := resolveRedisServer(context.Background(), "", dir)
			if (err == nil) != tc.ok {
				t.Fatalf("resolve = %q, %q, %v; want ok %v", bin, ver, err, tc.ok)
			}
			if !tc.ok {
				if !errors.Is(err, ErrConfig) {
					t.Errorf("error %v is not ErrConfig", err)
				}
				return
			}
			if bin != filepath.Join(dir, "redis-server") || ver != tc.ver {
				t.Errorf("resolve = %q, %q; want the link in %s, %q", bin, ver, dir, tc.ver)
			}
		})
	}
}
