package main_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
)

// buildBinaries builds kvd and kvctl into a temporary directory.
// buildBinaries returns the directory of kvd and kvctl, built once for
// every test of the package (kvdtest.SharedBin).
func buildBinaries(t *testing.T) string {
	t.Helper()
	return kvdtest.SharedBin(t)
}

// TestProcess starts kvd as a process and drives it with the client library
// and with kvctl, as a user would.
func TestProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping the process test in -short mode")
	}
	bin := buildBinaries(t)
	addrs := kvdtest.FreeAddrs(t, 2)
	listen, metrics := addrs[0], addrs[1]
	kvd := exec.Command(filepath.Join(bin, "kvd"), "--data-dir", t.TempDir(), "--listen", listen, "--initial-cluster", "1="+listen,
		"--metrics-listen", metrics, "--table-mem", "8MiB")
	var logs syncBuffer // read while kvd writes it
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

	kvctl := func(args ...string) (string, string, error) {
		cmd := exec.Command(filepath.Join(bin, "kvctl"), append([]string{"--endpoints", listen}, args...)...)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		return out.String(), errOut.String(), err
	}
	wait.NoError(t, "kvd to accept a put", func() error {
		if _, errOut, err := kvctl("--timeout", "1s", "put", "hello", "world"); err != nil {
			return fmt.Errorf("%v: %s\n%s", err, errOut, logs.String())
		}
		return nil
	})
	if out, _, err := kvctl("get", "hello"); err != nil || out != "world\n" {
		t.Fatalf("kvctl get hello = %q, %v", out, err)
	}
	out, errOut, err := kvctl("get", "missing")
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || out != "" || !strings.Contains(errOut, "not found") {
		t.Fatalf("kvctl get missing: stdout %q stderr %q err %v; want exit 1 and a message on stderr", out, errOut, err)
	}
	if out, _, err := kvctl("-w", "json", "get", "hello"); err != nil || !strings.Contains(out, `"value": "world"`) {
		t.Fatalf("kvctl -w json get = %q, %v", out, err)
	}
	// mget: found keys printed in order; a missing one named on stderr,
	// exit 1.
	if _, _, err := kvctl("put", "hello2", "world2"); err != nil {
		t.Fatal(err)
	}
	if out, _, err := kvctl("mget", "hello", "hello2"); err != nil || out != "hello\nworld\nhello2\nworld2\n" {
		t.Fatalf("kvctl mget hello hello2 = %q, %v", out, err)
	}
	out, errOut, err = kvctl("mget", "hello", "missing")
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || out != "hello\nworld\n" || !strings.Contains(errOut, "not found: missing") {
		t.Fatalf("kvctl mget hello missing: stdout %q stderr %q err %v; want hello printed, exit 1, missing named", out, errOut, err)
	}
	if out, _, err := kvctl("-w", "json", "mget", "hello2"); err != nil || !strings.Contains(out, `"value": "world2"`) {
		t.Fatalf("kvctl -w json mget = %q, %v", out, err)
	}
	if _, _, err := kvctl("bogus"); !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("unknown command: %v, want exit 2", err)
	}

	// A 1 MiB binary value, past the OS argument limit: from standard input
	// and from --value-file, read back byte for byte with -w raw.
	big := make([]byte, client.MaxValue)
	rand.Read(big)
	file := filepath.Join(t.TempDir(), "v")
	if err := os.WriteFile(file, big, 0o600); err != nil {
		t.Fatal(err)
	}
	// A 1 MiB write on a loaded machine may take longer than the
	// client's default one-second attempt.
	put := exec.Command(filepath.Join(bin, "kvctl"), "--endpoints", listen, "--attempt-timeout", "20s", "put", "big")
	put.Stdin = bytes.NewReader(big)
	if out, err := put.CombinedOutput(); err != nil {
		t.Fatalf("kvctl put big < 1 MiB: %v: %s", err, out)
	}
	if out, _, err := kvctl("-w", "raw", "get", "big"); err != nil || !bytes.Equal([]byte(out), big) {
		t.Fatalf("kvctl -w raw get big: %d bytes, %v; want the 1 MiB value exactly", len(out), err)
	}
	if _, errOut, err := kvctl("--attempt-timeout", "20s", "--value-file", file, "put", "big2"); err != nil {
		t.Fatalf("kvctl --value-file put: %v: %s", err, errOut)
	}
	if out, _, err := kvctl("-w", "raw", "get", "big2"); err != nil || !bytes.Equal([]byte(out), big) {
		t.Fatalf("kvctl -w raw get big2: %d bytes, %v", len(out), err)
	}
	tooBig := exec.Command(filepath.Join(bin, "kvctl"), "--endpoints", listen, "put", "huge")
	tooBig.Stdin = bytes.NewReader(append(big, 0))
	if out, err := tooBig.CombinedOutput(); err == nil || !strings.Contains(string(out), "too large") {
		t.Fatalf("kvctl put of MaxValue+1 bytes: %v: %s; want a clear refusal", err, out)
	}

	// status with one endpoint down: exit 1, each address printed once.
	dead := kvdtest.FreeAddrs(t, 1)[0]
	st := exec.Command(filepath.Join(bin, "kvctl"), "--endpoints", listen+","+dead, "--timeout", "3s", "status")
	var stOut, stErr bytes.Buffer
	st.Stdout, st.Stderr = &stOut, &stErr
	err = st.Run()
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("kvctl status with an endpoint down: %v, want exit 1\n%s%s", err, stOut.String(), stErr.String())
	}
	if n := strings.Count(stOut.String(), dead); n != 1 {
		t.Fatalf("kvctl status names the dead endpoint %d times, want once:\n%s", n, stOut.String())
	}

	c, err := client.New(client.Config{Endpoints: []string{listen}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	for _, k := range []string{"a", "b", "c"} {
		if err := c.Put(ctx, []byte(k), []byte("v-"+k)); err != nil {
			t.Fatal(err)
		}
	}
	if v, err := c.Get(ctx, []byte("b")); err != nil || string(v) != "v-b" {
		t.Fatalf("client get b = %q, %v", v, err)
	}
	if err := c.Delete(ctx, []byte("b")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, []byte("b")); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("get after delete: %v", err)
	}

	body := httpGet(t, "http://"+metrics+"/metrics")
	for _, m := range []string{"kvd_requests_total", "kvd_table_keys", "kvd_raft_term"} {
		if !strings.Contains(body, m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}
	if h := httpGet(t, "http://"+metrics+"/healthz"); !strings.Contains(h, `"healthy":true`) {
		t.Errorf("/healthz = %s", h)
	}
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestBadFlags: bad input gives a clear message and exit status 2.
func TestBadFlags(t *testing.T) {
	bin := buildBinaries(t)
	for _, tc := range []struct {
		args []string
		env  string
		want string
	}{
		{[]string{"--data-dir", t.TempDir(), "--transport", "carrier-pigeon"}, "", "unknown transport"},
		{[]string{"--data-dir", t.TempDir(), "--table-mem", "lots"}, "", "bad size"},
		{[]string{"--listen", "127.0.0.1:0"}, "", "--data-dir is required"},
		{[]string{"--data-dir", t.TempDir(), "--initial-cluster", "1=a:1,x"}, "", "bad cluster member"},
		{[]string{"--data-dir", t.TempDir()}, "KVD_TABLE_MEM=huge", "KVD_TABLE_MEM"},
		{[]string{"--no-such-flag"}, "", "flag provided but not defined"},
		// NaN passes "< 0 || > 0.5"; a NaN drift made the lease last ~292 years.
		{[]string{"--data-dir", t.TempDir(), "--lease-drift", "NaN"}, "", "lease drift"},
		{[]string{"--data-dir", t.TempDir()}, "KVD_LEASE_DRIFT=nan", "lease drift"},
	} {
		cmd := exec.Command(filepath.Join(bin, "kvd"), tc.args...)
		cmd.Env = append(os.Environ(), tc.env)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), tc.want) {
			t.Errorf("kvd %v (%s): exit %v, output %q; want exit 2 mentioning %q", tc.args, tc.env, err, out, tc.want)
		}
	}
}
