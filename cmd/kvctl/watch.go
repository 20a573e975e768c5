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
//	VERSION PUT KEY VALUE
//	VERSION DELETE KEY
//
// A key or value that is empty or holds spaces, quotes or unprintable
// bytes is printed Go-quoted, so each event is one line and the fields
// split on spaces. -w json prints one JSON object per line instead. The
// watch resumes by itself across node failures; it fails (exit 1) if the
// history it needs is gone (compacted).
func runWatch(_ context.Context, e *env, args []string) error {
	// A watch runs until SIGINT or SIGTERM, not --timeout.
	ctx, cancel := context.WithCancel(e.base)
	defer cancel()
	opts := []client.WatchOption{client.WithFromRevision(e.o.fromVersion.v)}
	if e.o.scan.prefix {
		opts = append(opts, client.WithPrefix())
	}
	for r := range e.c.Watch(ctx, []byte(args[0]), opts...) {
		if r.Err != nil {
			return r.Err
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
// get prints them (a key or value that is not UTF-8 in base64).
type watchJSON struct {
	Type string `json:"type"`
	kv
}

func (e *env) printEvent(ev client.Event) error {
	if e.o.write == "json" {
		x := watchJSON{Type: ev.Type.String(), kv: toKV(string(ev.Key), ev.Value, client.Meta{ModRevision: ev.ModRevision})}
		if ev.Type == client.EventDelete {
			x.Value = nil // a DELETE has no value, not an empty one
		}
		b, err := json.Marshal(x)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(e.out, "%s\n", b)
		return err
	}
	var err error
	if ev.Type == client.EventDelete {
		_, err = fmt.Fprintf(e.out, "%d %s %s\n", ev.ModRevision, ev.Type, field(ev.Key))
	} else {
		_, err = fmt.Fprintf(e.out, "%d %s %s %s\n", ev.ModRevision, ev.Type, field(ev.Key), field(ev.Value))
	}
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
