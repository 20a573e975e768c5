package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode"

	"github.com/kvd-project/kvd/client"
)

// runWatch prints KEY's events (with --prefix, those of every key under
// it), one line each, from now or --rev, until interrupted:
//
//	REVISION PUT KEY VALUE [PREV_VALUE]
//	REVISION DELETE KEY [PREV_VALUE]
//	progress notify: REVISION
//
// PREV_VALUE, with --prev-kv, is the key's value before the event, absent
// if the key did not exist; the progress lines come with
// --progress-notify (etcdctl's words). A key or value that is empty or
// holds spaces, quotes or unprintable bytes is printed Go-quoted, so each
// event is one line and the fields split on spaces. -w json prints one
// JSON object per line instead. The watch resumes by itself across node
// failures; it fails (exit 1) if the history it needs is gone (compacted).
func runWatch(_ context.Context, e *env, args []string) error {
	// A watch runs until SIGINT or SIGTERM, not --timeout.
	ctx, cancel := context.WithCancel(e.base)
	defer cancel()
	opts := []client.WatchOption{client.WithFromRevision(e.o.fromVersion.v)}
	if e.o.scan.prefix {
		opts = append(opts, client.WithPrefix())
	}
	if e.o.prevKV {
		opts = append(opts, client.WithPrevKV())
	}
	if e.o.progress {
		opts = append(opts, client.WithProgressNotify())
	}
	for r := range e.c.Watch(ctx, []byte(args[0]), opts...) {
		if r.Err != nil {
			return r.Err
		}
		if r.IsProgressNotify() {
			if err := e.printProgress(r.Revision); err != nil {
				return err
			}
			continue
		}
		for _, ev := range r.Events {
			if err := e.printEvent(ev); err != nil {
				return err
			}
		}
	}
	return nil
}

// watchJSON is -w json's line for an event: its type and the key/value as
// get prints them (a key or value that is not UTF-8 in base64; a PUT's
// with the key's metadata after it, a DELETE's with its revision), and with
// --prev-kv the key before it (etcd's prev_kv; absent if it did not
// exist).
type watchJSON struct {
	Type string `json:"type"`
	kv
	PrevKV *kv `json:"prev_kv,omitempty"`
}

// progressJSON is -w json's line for a progress notification.
type progressJSON struct {
	Type     string `json:"type"` // PROGRESS_NOTIFY
	Revision uint64 `json:"revision"`
}

func (e *env) printEvent(ev client.Event) error {
	if e.o.write == "json" {
		m := client.Meta{CreateRevision: ev.CreateRevision, ModRevision: ev.ModRevision, Version: ev.Version, Lease: ev.Lease}
		x := watchJSON{Type: ev.Type.String(), kv: toKV(string(ev.Key), ev.Value, m)}
		if ev.Type == client.EventDelete {
			x.Value = nil // a DELETE has no value, not an empty one
		}
		if p := ev.PrevKV; p != nil {
			pk := toKV(string(p.Key), p.Value, p.Meta)
			x.PrevKV = &pk
		}
		return e.jsonLine(x)
	}
	line := fmt.Sprintf("%d %s %s", ev.ModRevision, ev.Type, field(ev.Key))
	if ev.Type != client.EventDelete {
		line += " " + field(ev.Value)
	}
	if ev.PrevKV != nil {
		line += " " + field(ev.PrevKV.Value)
	}
	_, err := fmt.Fprintln(e.out, line)
	return err
}

func (e *env) printProgress(rev uint64) error {
	if e.o.write == "json" {
		return e.jsonLine(progressJSON{Type: "PROGRESS_NOTIFY", Revision: rev})
	}
	_, err := fmt.Fprintf(e.out, "progress notify: %d\n", rev)
	return err
}

func (e *env) jsonLine(x any) error {
	b, err := json.Marshal(x)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(e.out, "%s\n", b)
	return err
}

// field is b as one space-free field: as is, or Go-quoted if it is empty
// or holds anything but printable, non-space characters and no quote.
func field(b []byte) string {
	s := string(b)
	if s == "" {
		return `""`
	}
	for _, r := range s {
		if r == '"' || r == '\\' || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}
