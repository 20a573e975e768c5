package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kvd-project/kvd/bench"
)

// profiler takes a CPU profile of every started node during each point's
// measured part (kvbench run --cpuprofile), from the net/http/pprof
// endpoint that kvd --enable-pprof serves on its metrics listener.
type profiler struct {
	dir    string
	series string
	addrs  []string
	points int
	client http.Client
}

// profileSlack is how much longer than the profile itself a fetch may
// take (the node writes the profile out after sampling).
const profileSlack = 30 * time.Second

// start begins the profiles of one point; done waits for them and writes
// them as DIR/<n>-<series>-<point>-node<i>.pprof.
func (pr *profiler) start(p *bench.Point, d time.Duration) (done func() error) {
	pr.points++
	secs := max(1, int((d+time.Second/2)/time.Second))
	name := fmt.Sprintf("%03d-%s-%s", pr.points, pr.series, fileLabel(p.String()))
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(secs)*time.Second+profileSlack)
	errs := make(chan error, len(pr.addrs))
	for i, a := range pr.addrs {
		url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", a, secs)
		file := filepath.Join(pr.dir, fmt.Sprintf("%s-node%d.pprof", name, i+1))
		go func() { errs <- pr.fetch(ctx, url, file) }()
	}
	return func() error {
		defer cancel()
		var all []error
		for range pr.addrs {
			all = append(all, <-errs)
		}
		return errors.Join(all...)
	}
}

func (pr *profiler) fetch(ctx context.Context, url, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := pr.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s: %s: %s", url, resp.Status, strings.TrimSpace(string(msg)))
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", url, err)
	}
	return f.Close()
}

// fileLabel makes a point's label usable in a file name.
func fileLabel(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '.':
			return r
		case r == '/' || r == '=' || r == '@':
			return '_'
		}
		return '-'
	}, s)
}
