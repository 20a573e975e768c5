package main

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kvd-project/kvd/internal/kvdtest/wait"
)

// TestHTTPListenerLimit: connections beyond the limit are closed at once
// and counted; once the idle ones go, the listener serves again; a client
// that sends half a header is cut off by the header timeout's kind of
// limit (here the listener's only, so it is quick).
func TestHTTPListenerLimit(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	ln := newLimitListener(raw, 2, reg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	hs := &http.Server{
		Handler:           http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }),
		ReadHeaderTimeout: 200 * time.Millisecond,
	}
	go hs.Serve(ln)
	defer hs.Close()

	var idle []net.Conn // hold both slots with connections that never send
	for range 2 {
		c, err := net.Dial("tcp", raw.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
	}
	wait.For(t, "the server to accept them", func() bool { return len(ln.sem) == 2 })
	extra, err := net.Dial("tcp", raw.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	extra.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := extra.Read(make([]byte, 1)); err == nil {
		t.Fatal("a connection beyond the limit was served")
	}
	if n := testutil.ToFloat64(ln.refused); n < 1 {
		t.Fatalf("kvd_http_refused_total = %v, want >= 1", n)
	}
	// The idle connections time out (ReadHeaderTimeout), freeing the slots.
	wait.NoError(t, "the listener to serve again after its idle connections timed out", func() error {
		resp, err := (&http.Client{Timeout: time.Second}).Get("http://" + raw.Addr().String() + "/")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	})
	for _, c := range idle {
		c.Close()
	}
}
