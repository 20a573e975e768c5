package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	httppprof "net/http/pprof"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kvd-project/kvd/server"
	"github.com/kvd-project/kvd/transport"
	"github.com/kvd-project/kvd/transport/tcp"
)

// serveMetrics serves /metrics, /version and /healthz (also as /health) on raw. /healthz answers 200 while the
// node knows a leader (it can serve writes through it) and 503 otherwise,
// or after a storage failure, with the node's status as JSON either way and,
// when unhealthy, the reason ("storage: <cause>" or "no leader known").
//
// With pprof, net/http/pprof's handlers are served under /debug/pprof/, as
// etcd's --enable-pprof does. The listener has the limits of httplimit.go.
func serveMetrics(raw net.Listener, reg *prometheus.Registry, srv *server.Server, log *slog.Logger, faults http.Handler, pprof bool) *http.Server {
	ln := newLimitListener(raw, maxHTTPConns, reg, log)
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	health := func(w http.ResponseWriter, r *http.Request) {
		st := srv.Status()
		body := map[string]any{"healthy": true, "status": st}
		switch {
		case st.StorageError != "":
			body["healthy"], body["reason"] = false, "storage: "+st.StorageError
		case st.LeaderID == 0:
			body["healthy"], body["reason"] = false, "no leader known"
		}
		w.Header().Set("Content-Type", "application/json")
		if body["healthy"] == false {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		json.NewEncoder(w).Encode(body)
	}
	mux.HandleFunc("/version", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(versionBody())
	})
	mux.HandleFunc("/healthz", health)
	mux.HandleFunc("/health", health) // etcd's name for it
	if faults != nil {
		mux.Handle("/debug/faults", faults)
	}
	if pprof {
		mux.HandleFunc("/debug/pprof/", httppprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", httppprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", httppprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", httppprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", httppprof.Trace)
	}
	hs := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: httpReadHeaderTimeout,
		ReadTimeout:       httpReadTimeout,
		WriteTimeout:      httpWriteTimeout,
		IdleTimeout:       httpIdleTimeout,
		MaxHeaderBytes:    httpMaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	if pprof {
		hs.WriteTimeout = 0 // a CPU profile streams for as long as asked (?seconds=)
	}
	go func() {
		if err := hs.Serve(ln); err != nil && err != http.ErrServerClosed {
			log.Error("metrics server stopped", "err", err)
		}
	}()
	log.Info("serving metrics", "addr", ln.Addr().String())
	return hs
}

// faultHandler returns the fault-injection endpoint, or nil when it is off.
// It serves POST only, and returns at once:
//
//	POST /debug/faults?drop=ADDR1,ADDR2
//	    drop every message and one-sided READ to and from those peers (a
//	    network partition, in the transport; tcp transport only); drop=
//	    with no addresses heals.
//	POST /debug/faults?freeze=10s
//	    freeze the node for the given duration, as SIGSTOP would, while its
//	    table region goes on answering one-sided READs, as an RDMA NIC does
//	    for a stopped process (server.Server.Freeze): the Raft loop stops
//	    (no ticks, messages, applies or lease extensions), nothing writes
//	    the region, and client RPCs wait. The node thaws by itself; a
//	    freeze while one is under way is refused (409).
//
// Both may be given in one request.
func faultHandler(enabled bool, tr transport.Transport, srv *server.Server) http.Handler {
	if !enabled {
		return nil
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		q := r.URL.Query()
		if q.Has("freeze") {
			d, err := time.ParseDuration(q.Get("freeze"))
			if err != nil || d <= 0 {
				http.Error(w, "freeze: want a positive duration such as 10s", http.StatusBadRequest)
				return
			}
			if err := srv.Freeze(d); err != nil {
				code := http.StatusInternalServerError
				if errors.Is(err, server.ErrFrozen) {
					code = http.StatusConflict
				}
				http.Error(w, err.Error(), code)
				return
			}
			fmt.Fprintf(w, "frozen for %v\n", d)
			if !q.Has("drop") {
				return
			}
		}
		t, ok := tr.(*tcp.Transport)
		if !ok {
			http.Error(w, "drop needs the tcp transport", http.StatusNotImplemented)
			return
		}
		drop := map[string]bool{}
		for _, a := range strings.Split(q.Get("drop"), ",") {
			if a = strings.TrimSpace(a); a != "" {
				drop[a] = true
			}
		}
		t.SetFilter(func(local, remote string) bool { return drop[remote] })
		fmt.Fprintf(w, "dropping traffic to and from %d peers\n", len(drop))
	})
}
