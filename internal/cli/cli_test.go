package cli

import (
	"bytes"
	"errors"
	"flag"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvd-project/kvd/transport/rdma"
)

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"4096", 4096, true}, {"64MiB", 64 << 20, true}, {"1g", 1 << 30, true}, {"2 KiB", 2048, true},
		{"16mb", 16 << 20, true}, {"", 0, false}, {"-1", 0, false}, {"ten", 0, false}, {"1TiB", 0, false},
	} {
		got, err := ParseSize(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestParseCluster(t *testing.T) {
	m, err := ParseCluster("1=127.0.0.1:1, 2=127.0.0.1:2,3=h:3")
	if err != nil || len(m) != 3 || m[2] != "127.0.0.1:2" {
		t.Fatalf("got %v, %v", m, err)
	}
	if got := FormatCluster(m); got != "1=127.0.0.1:1,2=127.0.0.1:2,3=h:3" {
		t.Fatalf("FormatCluster = %q", got)
	}
	for _, bad := range []string{"1", "0=a:1", "x=a:1", "1=", "1=a:1,1=b:2", "1=a:1,2=a:1", "1=[::1]:1,2=[0::1]:1", "1=A:1,2=a:1", "1=a", "1=a:0", "1=:7000", "1=a:b:1"} {
		if _, err := ParseCluster(bad); err == nil {
			t.Errorf("ParseCluster(%q) succeeded", bad)
		}
	}
}

func TestApplyEnv(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	listen := fs.String("listen", "", "")
	id := fs.Uint64("id", 1, "")
	dir := fs.String("data-dir", "", "")
	if err := fs.Parse([]string{"--id", "3"}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KVD_LISTEN", "127.0.0.1:9")
	t.Setenv("KVD_ID", "7")
	t.Setenv("KVD_DATA_DIR", "/d")
	if err := ApplyEnv(fs, "KVD_"); err != nil {
		t.Fatal(err)
	}
	if *listen != "127.0.0.1:9" || *id != 3 || *dir != "/d" {
		t.Fatalf("listen=%q id=%d dir=%q: flags must win over env, env over defaults", *listen, *id, *dir)
	}
	t.Setenv("KVD_ID", "seven")
	fs2 := flag.NewFlagSet("y", flag.ContinueOnError)
	fs2.Uint64("id", 1, "")
	_ = fs2.Parse(nil)
	if err := ApplyEnv(fs2, "KVD_"); err == nil {
		t.Fatal("bad env value accepted")
	}
}

// --rdma-tos and --rdma-ack-timeout reach rdma.Config (a bad value is the
// rdma transport's ErrConfig, in any build), and need --transport rdma.
func TestRDMATuningFlags(t *testing.T) {
	parse := func(args ...string) *TransportFlags {
		t.Helper()
		var f TransportFlags
		fs := flag.NewFlagSet("kvd", flag.ContinueOnError)
		f.Register(fs)
		f.RegisterRDMATuning(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return &f
	}
	f := parse("--rdma-tos", "96", "--rdma-ack-timeout", "10ms")
	if f.RDMATOS != 96 || f.RDMAAckTimeout != 10*time.Millisecond {
		t.Fatalf("flags = %d, %v", f.RDMATOS, f.RDMAAckTimeout)
	}
	if _, err := f.Transport(""); err == nil || !strings.Contains(err.Error(), "need --transport rdma") {
		t.Fatalf("tcp with RDMA tuning flags = %v", err)
	}
	// Every RDMA flag: over tcp it would be ignored, a typo unnoticed.
	for _, only := range [][]string{{"--rdma-device", "rxe0"}, {"--rdma-poll", "busy"}, {"--rdma-poll", "bogus"}, {"--rdma-spin", "1ms"}} {
		if tr, err := parse(only...).Transport(""); err == nil || !strings.Contains(err.Error(), "need --transport rdma") {
			if tr != nil {
				_ = tr.Close()
			}
			t.Errorf("tcp with %v = %v, want a refusal", only, err)
		}
	}
	if tr, err := parse("--rdma-poll", "events").Transport(""); err != nil {
		t.Errorf("tcp with the default --rdma-poll: %v", err)
	} else {
		_ = tr.Close()
	}
	for _, bad := range [][]string{{"--rdma-tos", "256"}, {"--rdma-ack-timeout", "3h"}} {
		f := parse(append([]string{"--transport", "rdma"}, bad...)...)
		if tr, err := f.Transport(""); !errors.Is(err, rdma.ErrConfig) {
			if tr != nil {
				_ = tr.Close()
			}
			t.Errorf("%v: Transport = %v, want rdma.ErrConfig", bad, err)
		}
	}
}

func TestUnknownEnv(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.String("table-mem", "", "")
	t.Setenv("KVX_TABLE_MEM", "1")
	t.Setenv("KVX_TABLE_MEMORY", "1")
	t.Setenv("KVX_ZZ", "1")
	t.Setenv("OTHER_TABLE_MEMORY", "1")
	got := UnknownEnv(fs, "KVX_")
	if want := []string{"KVX_TABLE_MEMORY", "KVX_ZZ"}; !slices.Equal(got, want) {
		t.Fatalf("UnknownEnv = %q, want %q", got, want)
	}
}

// TestParseOneLine: a flag typo is one line naming the flag and where the
// usage is, not the usage itself; -h still prints the usage.
func TestParseOneLine(t *testing.T) {
	newFS := func() *flag.FlagSet {
		fs := flag.NewFlagSet("kvd", flag.ContinueOnError)
		fs.String("listen", "", "address to listen on")
		return fs
	}
	var help bytes.Buffer
	err := Parse(newFS(), []string{"--lisen", "x"}, &help, nil)
	if err == nil || err.Error() != "flag provided but not defined: -lisen (see kvd -h)" || help.Len() != 0 {
		t.Fatalf("--lisen: err %v, help %q", err, help.String())
	}
	err = Parse(newFS(), []string{"-h"}, &help, nil)
	if !errors.Is(err, flag.ErrHelp) || !strings.Contains(help.String(), "-listen") {
		t.Fatalf("-h: err %v, help %q", err, help.String())
	}
}

// TestCommandLineOnly: a flag named command-line-only takes no value from
// the environment (a KVD_VERSION set for something else must not make kvd
// print its version and exit), and its variable is reported as unknown.
func TestCommandLineOnly(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	version := fs.Bool("version", false, "")
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KVX_VERSION", "true")
	if err := ApplyEnv(fs, "KVX_", "version"); err != nil || *version {
		t.Fatalf("ApplyEnv with KVX_VERSION=true: version %t, err %v; want false, nil", *version, err)
	}
	if got := UnknownEnv(fs, "KVX_", "version"); !slices.Equal(got, []string{"KVX_VERSION"}) {
		t.Fatalf("UnknownEnv = %v, want [KVX_VERSION]", got)
	}
}
