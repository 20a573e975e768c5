package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFrontKeyChecked: with --rdma-auth-file, a node's etcd and Redis
// fronts connect with the client key --rdma-auth-client-name names, never
// with the node's peer key (which servers refuse client requests on); a
// missing, unknown or peer key is refused at startup with a clear error.
func TestFrontKeyChecked(t *testing.T) {
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys")
	hex := strings.Repeat("ab", 32)
	if err := os.WriteFile(keys, []byte("node1:peer:"+hex+"\nfront:rw:"+hex+"\nview:ro:"+hex+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	auth := []string{"--transport", "rdma", "--rdma-auth-file", keys, "--rdma-auth-name", "node1"}
	etcd := []string{"--listen-client-urls", "http://127.0.0.1:0"}
	redis := []string{"--redis-listen", "127.0.0.1:0"}
	join := func(parts ...[]string) []string {
		var out []string
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	for _, tt := range []struct {
		name string
		args []string
		want string // "" accepted, else a substring of the error
	}{
		{"no auth, no fronts", nil, ""},
		{"fronts without auth", join(etcd, redis), ""},
		{"auth without fronts", auth, ""},
		{"etcd front without a client key", join(auth, etcd), "needs --rdma-auth-client-name"},
		{"redis front without a client key", join(auth, redis), "needs --rdma-auth-client-name"},
		{"rw client key", join(auth, etcd, redis, []string{"--rdma-auth-client-name", "front"}), ""},
		{"ro client key", join(auth, etcd, []string{"--rdma-auth-client-name", "view"}), ""},
		{"peer key", join(auth, etcd, []string{"--rdma-auth-client-name", "node1"}), `key "node1" is a peer key`},
		{"unknown key", join(auth, redis, []string{"--rdma-auth-client-name", "nobody"}), `"nobody" is not among the keys`},
		{"client key without auth", join(etcd, []string{"--rdma-auth-client-name", "front"}), "needs --rdma-auth-file"},
		{"client key without fronts", join(auth, []string{"--rdma-auth-client-name", "front"}), "neither is set"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parseFlags(append([]string{"--data-dir", dir}, tt.args...))
			if err != nil {
				t.Fatal(err)
			}
			err = checkFrontKey(o)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
			if err == nil && o.transport.RDMAAuthFile != "" && o.frontKey != "" {
				if got := frontTransport(o).RDMAAuthName; got != o.frontKey {
					t.Errorf("the fronts dial with key %q, want %q", got, o.frontKey)
				}
				if o.transport.RDMAAuthName != "node1" {
					t.Errorf("the node's own key became %q", o.transport.RDMAAuthName)
				}
			}
		})
	}
}
