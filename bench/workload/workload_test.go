package workload

import (
	"errors"
	"math"
	"testing"
)

func TestParseMix(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want Mix
		ok   bool
	}{
		{"95/5", 95, true}, {"50/50", 50, true}, {"100", 100, true}, {"0/100", 0, true},
		{"ycsb-a", 50, true}, {"YCSB-B", 95, true}, {"c", 100, true}, {"get", 100, true}, {"put", 0, true},
		{"90/20", 0, false}, {"101", 0, false}, {"-1", 0, false}, {"lots", 0, false}, {"", 0, false},
	} {
		got, err := ParseMix(tc.in)
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("ParseMix(%q) = %v, %v; want %v ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrConfig) {
			t.Errorf("ParseMix(%q) error %v does not wrap ErrConfig", tc.in, err)
		}
	}
	if s := Mix(95).String(); s != "95/5" {
		t.Errorf("Mix(95).String() = %q", s)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"defaults", Config{}, true},
		{"key too short for key space", Config{Keys: 1000, KeySize: 3}, false},
		{"key just fits", Config{Keys: 1000, KeySize: 4}, true},
		{"zipf exponent 1", Config{Dist: Zipf, ZipfS: 1}, false},
		{"zipf default exponent", Config{Dist: Zipf}, true},
		{"mix above 100", Config{Mix: 101}, false},
		{"negative value", Config{ValueSize: -1}, false},
	} {
		cfg := tc.cfg
		err := cfg.Validate()
		if (err == nil) != tc.ok {
			t.Errorf("%s: Validate = %v, want ok=%v", tc.name, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v does not wrap ErrConfig", tc.name, err)
		}
	}
}

func TestKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		i, size int
		want    string
	}{
		{0, 4, "k000"}, {7, 4, "k007"}, {999, 4, "k999"}, {12345, 8, "k0012345"}, {3, 1, "k"},
	} {
		if got := string(AppendKey(nil, tc.i, tc.size)); got != tc.want {
			t.Errorf("AppendKey(%d, %d) = %q, want %q", tc.i, tc.size, got, tc.want)
		}
	}
}

// TestMixRatio: the share of GETs drawn matches the mix (within 1% over
// 100k draws; the generator is deterministic, so this cannot flake).
func TestMixRatio(t *testing.T) {
	t.Parallel()
	for _, m := range []Mix{ReadOnly, ReadMost, ReadHalf, WriteOnly} {
		cfg := Config{Mix: m}.WithDefaults()
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		g := New(cfg, 1, 2)
		const n = 100000
		gets := 0
		for range n {
			op, idx := g.Next()
			if op == Get {
				gets++
			}
			if idx < 0 || idx >= cfg.Keys {
				t.Fatalf("key index %d outside [0,%d)", idx, cfg.Keys)
			}
		}
		if got := 100 * float64(gets) / n; math.Abs(got-float64(m)) > 1 {
			t.Errorf("mix %v: %.2f%% GETs", m, got)
		}
	}
}

func counts(cfg Config, n int) []int {
	g := New(cfg, 42, 0)
	c := make([]int, cfg.Keys)
	for range n {
		c[g.Index()]++
	}
	return c
}

// TestZipfSkew: under Zipf the hottest key is drawn about 2^s times as
// often as the second hottest, and far more than under uniform.
func TestZipfSkew(t *testing.T) {
	t.Parallel()
	const n = 200000
	zc := Config{Dist: Zipf, Keys: 1000, ZipfS: 1.2}
	uc := Config{Keys: 1000}
	for _, c := range []*Config{&zc, &uc} {
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
	}
	z, u := counts(zc, n), counts(uc, n)
	// Rank r lands on key r*scatter % Keys.
	hot := func(rank int) int { return z[rank*scatter%zc.Keys] }
	ratio := float64(hot(0)) / float64(hot(1))
	if want := math.Pow(2, zc.ZipfS); math.Abs(ratio-want) > 0.1*want {
		t.Errorf("rank0/rank1 = %.3f, want about %.3f", ratio, want)
	}
	maxU := 0
	for _, v := range u {
		maxU = max(maxU, v)
	}
	if hot(0) < 20*maxU {
		t.Errorf("zipf hottest key %d draws, uniform hottest %d: not skewed", hot(0), maxU)
	}
	// The hot keys are scattered, not packed at the start of the key space.
	if z[1] >= hot(1)/2 || z[2] >= hot(2)/2 {
		t.Errorf("keys 1 and 2 drawn %d and %d times: hot ranks are not scattered", z[1], z[2])
	}
	// Uniform: no key is more than 1.5x its fair share.
	if fair := n / uc.Keys; maxU > fair*3/2 {
		t.Errorf("uniform hottest key drawn %d times, fair share %d", maxU, fair)
	}
}

func TestDeterministic(t *testing.T) {
	t.Parallel()
	cfg := Config{Mix: ReadMost, Dist: Zipf}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	a, b, c := New(cfg, 9, 1), New(cfg, 9, 1), New(cfg, 9, 2)
	same, diff := true, false
	for range 100 {
		oa, ia := a.Next()
		ob, ib := b.Next()
		_, ic := c.Next()
		same = same && oa == ob && ia == ib
		diff = diff || ia != ic
	}
	if !same || !diff {
		t.Errorf("same stream identical=%v, other stream differs=%v", same, diff)
	}
}

func TestNextAllocatesNothing(t *testing.T) {
	cfg := Config{Mix: ReadMost, Dist: Zipf}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	g := New(cfg, 1, 1)
	if n := testing.AllocsPerRun(1000, func() {
		_, i := g.Next()
		_ = g.Key(i)
	}); n != 0 {
		t.Errorf("Next+Key allocate %v times per op", n)
	}
}

func BenchmarkNext(b *testing.B) {
	for _, d := range []Dist{Uniform, Zipf} {
		b.Run(d.String(), func(b *testing.B) {
			cfg := Config{Mix: ReadMost, Dist: d}
			if err := cfg.Validate(); err != nil {
				b.Fatal(err)
			}
			g := New(cfg, 1, 1)
			b.ReportAllocs()
			for b.Loop() {
				_, i := g.Next()
				_ = g.Key(i)
			}
		})
	}
}
