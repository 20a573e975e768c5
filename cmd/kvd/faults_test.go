package main

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/kvdtest"
)

// TestFaultHandler: the fault endpoint's answers (the faults themselves are
// exercised by internal/chaos).
func TestFaultHandler(t *testing.T) {
	if faultHandler(false, nil, nil) != nil {
		t.Fatal("fault endpoint served without --enable-fault-injection")
	}
	nodes := kvdtest.StartCluster(t, 1, kvdtest.Options{})
	n := kvdtest.WaitLeader(t, nodes, 10*time.Second)
	h := faultHandler(true, n.Tr, n.Srv)
	for _, tc := range []struct {
		method, query string
		want          int
	}{
		{http.MethodGet, "freeze=1s", http.StatusMethodNotAllowed},
		{http.MethodPost, "freeze=soon", http.StatusBadRequest},
		{http.MethodPost, "freeze=-1s", http.StatusBadRequest},
		{http.MethodPost, "freeze=30s", http.StatusOK},      // ended by the node's Close
		{http.MethodPost, "freeze=1s", http.StatusConflict}, // already frozen
		{http.MethodPost, "drop=127.0.0.1:1", http.StatusOK},
		{http.MethodPost, "drop=", http.StatusOK},
	} {
		w := httptest.NewRecorder()
		start := time.Now()
		h.ServeHTTP(w, httptest.NewRequest(tc.method, "/debug/faults?"+tc.query, nil))
		if w.Code != tc.want {
			t.Errorf("%s ?%s: %d %q, want %d", tc.method, tc.query, w.Code, w.Body, tc.want)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("%s ?%s took %v: the endpoint must return at once", tc.method, tc.query, d)
		}
	}
}
