package cli

import (
	"flag"
	"testing"
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
	for _, bad := range []string{"1", "0=a:1", "x=a:1", "1=", "1=a:1,1=b:2"} {
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
