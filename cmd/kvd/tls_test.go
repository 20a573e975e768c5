package main_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
	"github.com/kvd-project/kvd/internal/tlsutil"
	"github.com/kvd-project/kvd/internal/tlsutil/tlstest"
	"github.com/kvd-project/kvd/transport"
	"github.com/kvd-project/kvd/transport/tcp"
)

// tlsFiles writes a client CA, a peer CA and the certificates a one-node
// TLS setup needs into dir.
type tlsFiles struct {
	dir                          string
	clientCA, peerCA             *tlstest.CA
	caFile, peerCAFile           string
	cert, key, peerCert, peerKey string
}

func newTLSFiles(t *testing.T) *tlsFiles {
	f := &tlsFiles{dir: t.TempDir(), clientCA: tlstest.NewCA(t, "client CA"), peerCA: tlstest.NewCA(t, "peer CA")}
	f.caFile = f.clientCA.Write(t, f.dir, "ca.crt")
	f.peerCAFile = f.peerCA.Write(t, f.dir, "peer-ca.crt")
	f.cert, f.key = f.clientCA.Issue(t, "server-1", tlstest.Options{}).Write(t, f.dir, "server")
	f.peerCert, f.peerKey = f.peerCA.Issue(t, "peer-1", tlstest.Options{}).Write(t, f.dir, "peer")
	return f
}

// serverArgs are kvd's TLS flags for f, with client and peer certificate
// authentication.
func (f *tlsFiles) serverArgs() []string {
	return []string{"--cert-file", f.cert, "--key-file", f.key, "--trusted-ca-file", f.caFile, "--client-cert-auth",
		"--peer-cert-file", f.peerCert, "--peer-key-file", f.peerKey, "--peer-trusted-ca-file", f.peerCAFile,
		"--peer-client-cert-auth"}
}

// TestBadTLSFlags: kvd refuses to start with TLS settings or material that
// cannot work, with a message naming the flag, and exit status 2.
func TestBadTLSFlags(t *testing.T) {
	bin := buildBinaries(t)
	f := newTLSFiles(t)
	_, otherKey := f.clientCA.Issue(t, "other", tlstest.Options{}).Write(t, f.dir, "other")
	replace := func(flag, value string) []string {
		args := f.serverArgs()
		for i := range args {
			if args[i] == flag {
				args[i+1] = value
			}
		}
		return args
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"missing file", replace("--cert-file", filepath.Join(f.dir, "missing.crt")),
			"kvd: TLS: --cert-file: open " + filepath.Join(f.dir, "missing.crt")},
		{"key of another certificate", replace("--peer-key-file", otherKey), "private key does not match"},
		{"not a CA bundle", replace("--trusted-ca-file", f.key), "--trusted-ca-file " + f.key + ": no PEM certificate"},
		{"clients only", []string{"--cert-file", f.cert, "--key-file", f.key}, "TLS is on for both or neither"},
		{"clients only, one address", []string{"--cert-file", f.cert, "--key-file", f.key}, "--listen-peer"},
		{"peer TLS settings without a peer certificate", []string{"--listen-peer", "127.0.0.1:0", "--cert-file", f.cert, "--key-file", f.key,
			"--peer-client-cert-auth"}, "give --peer-cert-file"},
		{"rdma", append(f.serverArgs(), "--transport", "rdma"), "TLS needs --transport tcp"},
		{"auth without a CA", []string{"--cert-file", f.cert, "--key-file", f.key, "--client-cert-auth",
			"--peer-cert-file", f.peerCert, "--peer-key-file", f.peerKey, "--peer-trusted-ca-file", f.peerCAFile},
			"--client-cert-auth needs --trusted-ca-file"},
	} {
		cmd := exec.Command(filepath.Join(bin, "kvd"), append([]string{"--data-dir", t.TempDir(), "--listen", "127.0.0.1:0"}, tc.args...)...)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), tc.want) {
			t.Errorf("%s: exit %v, output %q; want exit 2 mentioning %q", tc.name, err, out, tc.want)
		}
	}
}

// TestProcessTLS runs kvd with TLS flags (some through KVD_ environment
// variables) and drives it with kvctl's --cacert/--cert/--key: a
// read-write certificate writes, a read-only one (--read-only-client-cn)
// only reads, plaintext gets nowhere, and SIGHUP makes new connections use a
// rotated certificate without a restart.
func TestProcessTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping the process test in -short mode")
	}
	bin := buildBinaries(t)
	f := newTLSFiles(t)
	aliceCert, aliceKey := f.clientCA.Issue(t, "alice", tlstest.Options{}).Write(t, f.dir, "alice")
	carolCert, carolKey := f.clientCA.Issue(t, "carol", tlstest.Options{}).Write(t, f.dir, "carol")
	listen := kvdtest.FreeAddrs(t, 1)[0]

	args := append([]string{"--data-dir", t.TempDir(), "--listen", listen, "--initial-cluster", "1=" + listen, "--table-mem", "8MiB",
		"--read-only-client-cn", "carol", "--tls-reload-interval", "0"}, f.serverArgs()...)
	// The peer flags come from the environment instead.
	args = withoutFlags(args, "--peer-cert-file", "--peer-key-file")
	kvd := exec.Command(filepath.Join(bin, "kvd"), args...)
	kvd.Env = append(os.Environ(), "KVD_PEER_CERT_FILE="+f.peerCert, "KVD_PEER_KEY_FILE="+f.peerKey)
	var logs syncBuffer
	kvd.Stderr = &logs
	if err := kvd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		kvd.Process.Signal(syscall.SIGTERM)
		if err := kvd.Wait(); err != nil {
			t.Errorf("kvd did not exit cleanly on SIGTERM: %v\n%s", err, logs.String())
		}
	}()

	kvctl := func(env []string, args ...string) (string, string, error) {
		cmd := exec.Command(filepath.Join(bin, "kvctl"), append([]string{"--endpoints", listen, "--timeout", "3s"}, args...)...)
		cmd.Env = append(os.Environ(), env...)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		return out.String(), errOut.String(), err
	}
	alice := []string{"--cacert", f.caFile, "--cert", aliceCert, "--key", aliceKey}
	wait.NoError(t, "kvd to accept a put over TLS", func() error {
		if _, errOut, err := kvctl(nil, append(alice, "put", "hello", "world")...); err != nil {
			return fmt.Errorf("%v: %s\n%s", err, errOut, logs.String())
		}
		return nil
	})
	if out, errOut, err := kvctl(nil, append(alice, "get", "hello")...); err != nil || out != "world\n" {
		t.Fatalf("kvctl get over TLS = %q, %v (%s)", out, err, errOut)
	}
	// carol is read-only; her flags come from KVCTL_ variables.
	carol := []string{"KVCTL_CACERT=" + f.caFile, "KVCTL_CERT=" + carolCert, "KVCTL_KEY=" + carolKey}
	if out, errOut, err := kvctl(carol, "get", "hello"); err != nil || out != "world\n" {
		t.Fatalf("read-only get = %q, %v (%s)", out, err, errOut)
	}
	var ee *exec.ExitError
	if _, errOut, err := kvctl(carol, "put", "hello", "carol"); !errors.As(err, &ee) || ee.ExitCode() != 1 ||
		!strings.Contains(errOut, "kvd: permission denied") {
		t.Fatalf("read-only put: %v, stderr %q; want exit 1 and kvd: permission denied", err, errOut)
	}
	// A backup is a read: the read-only credential may take one.
	if out, errOut, err := kvctl(carol, "snapshot", "save", filepath.Join(t.TempDir(), "b.kvd")); err != nil ||
		!strings.HasPrefix(out, "saved ") {
		t.Fatalf("read-only snapshot save = %q, %v (%s)", out, err, errOut)
	}
	// ... and is told why, at once (not left to see the socket close and
	// report the node unreachable after its timeout).
	if _, errOut, err := kvctl(nil, "get", "hello"); err == nil || !strings.Contains(errOut, "kvd: unauthenticated") ||
		!strings.Contains(errOut, "requires TLS") {
		t.Fatalf("plaintext kvctl against a TLS kvd: %v (stderr %q); want kvd: unauthenticated, naming TLS", err, errOut)
	}
	if _, errOut, err := kvctl(nil, "--cacert", f.caFile, "get", "hello"); err == nil {
		t.Fatalf("kvctl without a client certificate got through (stderr %q)", errOut)
	}

	// Rotate the server certificate; SIGHUP; new connections see it.
	f.clientCA.Issue(t, "server-2", tlstest.Options{}).Write(t, f.dir, "server")
	if err := kvd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	cs, err := tlsutil.NewClient(tlsutil.ClientFiles{CACert: f.caFile, Cert: aliceCert, Key: aliceKey})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := tcp.New(tcp.Config{TLS: cs.TCP()})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	wait.NoError(t, "kvd to show its new certificate after SIGHUP", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c, err := tr.Dial(ctx, listen)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		name := transport.IdentityOf(c).Name()
		c.Close()
		if name != "server-2" {
			return fmt.Errorf("kvd still shows %q\n%s", name, logs.String())
		}
		return nil
	})
	if out, errOut, err := kvctl(nil, append(alice, "get", "hello")...); err != nil || out != "world\n" {
		t.Fatalf("kvctl get after the reload = %q, %v (%s)", out, err, errOut)
	}
	if !strings.Contains(logs.String(), "TLS material reloaded") {
		t.Errorf("no reload in kvd's log:\n%s", logs.String())
	}
}

// withoutFlags removes each named flag and its value from args.
func withoutFlags(args []string, flags ...string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		if slices.Contains(flags, args[i]) {
			i++
			continue
		}
		out = append(out, args[i])
	}
	return out
}

// syncBuffer is a bytes.Buffer safe for a process's writes and the test's
// reads at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
