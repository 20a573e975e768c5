// Command sim estimates the placement numbers behind table layout 3
// (docs/layout.md, "Parameters"): why a key has two independent buckets, why
// arenas are 10 records long, and what layout 3 costs in memory.
//
// It is a model, not the table: keys are random hashes, buckets are
// counters, and nothing here is imported by kvd. Four experiments:
//
//	windows  one READ per GET after the header: a key may live in any of
//	         the H consecutive buckets (8 slots each) starting at its home
//	         bucket (a hopscotch-style neighbourhood read as one READ).
//	         Placement is optimal (earliest-deadline greedy, exact for
//	         equal-length windows), so an overflow here is a key set that no
//	         writer could place. Reports, per load and H, the probability
//	         that a table of 2^k buckets cannot hold the keys.
//	cuckoo   two independent buckets (layout 2's choice, kept by
//	         layout 3): insert keys one by one with layout 2's policy
//	         (less-loaded bucket, breadth-first chain of moves, 512-bucket
//	         search for everyday writes) until the first failure, then go on
//	         with an unlimited search (a rebuild) until the first failure.
//	arena    inline records in the buckets' arenas: each small record sits
//	         in the arena of its slot's bucket (or, for comparison, of either
//	         candidate bucket), and superseded records hold their bytes for
//	         one grace period. Reports the fraction of writes and of keys
//	         that spill to the record area.
//	memory   bytes of region per key, layout 2 and layout 3, by value size.
//
// Usage: go run ./bench/sim [-exp all|windows|cuckoo|arena|memory] [-maxlog 24]
//
// Everything is seeded: the same flags print the same numbers.
package main

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"time"
)

func main() {
	exp := flag.String("exp", "all", "experiment: all, windows, cuckoo, arena, memory")
	maxlog := flag.Int("maxlog", 24, "largest table, log2 of buckets, for windows")
	cuckooMax := flag.Int("cuckoomax", 20, "largest table, log2 of buckets, for cuckoo")
	flag.Parse()
	start := time.Now()
	run := func(name string, f func()) {
		if *exp == "all" || *exp == name {
			t := time.Now()
			f()
			fmt.Printf("(%s: %.1fs)\n\n", name, time.Since(t).Seconds())
		}
	}
	run("windows", func() { windows(*maxlog) })
	run("cuckoo", func() { cuckoo(*cuckooMax) })
	run("arena", arena)
	run("memory", memory)
	fmt.Fprintf(os.Stderr, "total %.1fs\n", time.Since(start).Seconds())
}

// ---------------------------------------------------------------- windows

// poissonTable samples Poisson(mu) by inverting its CDF.
type poissonTable []float64

func newPoisson(mu float64) poissonTable {
	var cdf poissonTable
	p := math.Exp(-mu)
	s := p
	for k := 0; s < 1-1e-15 && k < 200; k++ {
		cdf = append(cdf, s)
		p *= mu / float64(k+1)
		s += p
	}
	return append(cdf, 1)
}

func (t poissonTable) sample(r *rand.Rand) int {
	u := r.Float64()
	k := 0
	for k < len(t)-1 && u > t[k] {
		k++
	}
	return k
}

// windowRun places Poisson(8*alpha) keys per home bucket into windows of h
// buckets of 8 slots (n home buckets, h-1 extra buckets at the end so that
// windows do not wrap) and returns the keys that cannot be placed and the
// number of separate overflow episodes. Earliest-deadline-first is an
// optimal placement for windows of equal length.
func windowRun(n, h int, pt poissonTable, r *rand.Rand) (dropped, episodes int) {
	pend := make([]int, h) // pending keys by home mod h
	prevDrop := false
	for j := 0; j < n+h-1; j++ {
		idx := j % h
		d := pend[idx] // home j-h: its window ended at j-1
		pend[idx] = 0
		if j < n {
			pend[idx] = pt.sample(r)
		}
		if d > 0 {
			dropped += d
			if !prevDrop {
				episodes++
			}
		}
		prevDrop = d > 0
		c := 8
		for k := j - h + 1; k <= j && c > 0; k++ {
			if k < 0 {
				continue
			}
			i := k % h
			t := min(c, pend[i])
			pend[i] -= t
			c -= t
		}
	}
	return dropped, episodes
}

// poissonTail is P(X > c) for X ~ Poisson(mu), summed in log space.
func poissonTail(mu float64, c int) float64 {
	if mu == 0 {
		return 0
	}
	sum := 0.0
	for k := c + 1; ; k++ {
		lg, _ := math.Lgamma(float64(k + 1))
		t := math.Exp(-mu + float64(k)*math.Log(mu) - lg)
		sum += t
		if t < sum*1e-12 || t == 0 {
			break
		}
	}
	return min(sum, 1)
}

// windowBound is a union bound, per home bucket, on the probability that
// Hall's condition fails at an interval of buckets starting there: more
// keys whose whole window lies in L consecutive buckets (homes in the first
// L-h+1 of them) than the 8L slots of those buckets.
func windowBound(h int, alpha float64) float64 {
	u := 0.0
	for l := h; l < 1<<16; l++ {
		t := poissonTail(8*alpha*float64(l-h+1), 8*l)
		u += t
		if l > 4*h && t < u*1e-9 {
			break
		}
	}
	return u
}

func windows(maxlog int) {
	fmt.Println("## windows: one contiguous READ of H buckets (8 slots each), single home bucket")
	fmt.Println()
	fmt.Println("P(a table of 2^k buckets cannot place its keys at all) under optimal placement (so no")
	fmt.Println("hopscotch displacement policy can do better). Cells marked * are measured directly")
	fmt.Println("(2^20 bucket-steps per cell); the others are 1-exp(-rate*2^k) with rate = overflow episodes")
	fmt.Println("per bucket measured over 2^22 bucket-steps, or, where none was seen, the Hall union bound")
	fmt.Println("min(1, 2^k*u), u = sum over interval lengths L of P(Poisson(8*load*(L-H+1)) > 8L).")
	fmt.Println()
	loads := []float64{0.50, 0.70, 0.80, 0.85, 0.90, 0.9375}
	hs := []int{1, 2, 4, 8, 16}
	var sizes []int
	for k := 10; k <= maxlog; k += 2 {
		sizes = append(sizes, k)
	}
	var cols []string
	for _, k := range sizes {
		cols = append(cols, fmt.Sprintf("2^%d", k))
	}
	printHeader([]string{"H (bytes of slots per READ)", "load", "u (bound/bucket)", "rate/bucket"}, cols)
	r := rand.New(rand.NewPCG(1, 2))
	for _, h := range hs {
		for _, a := range loads {
			pt := newPoisson(8 * a)
			u := windowBound(h, a)
			const rn = 1 << 16
			eps, steps := 0, 0
			for steps < 1<<22 && eps <= 2000 {
				_, e := windowRun(rn, h, pt, r)
				eps += e
				steps += rn
			}
			rate := float64(eps) / float64(steps)
			line := fmt.Sprintf("| %d (%d B) | %.4g | %.1e | %s |", h, h*64, a, u, fmtRate(eps, steps))
			for _, k := range sizes {
				n := 1 << k
				var cell string
				switch {
				case k <= 14:
					trials := (1 << 20) / n
					fails := 0
					for range trials {
						if d, _ := windowRun(n, h, pt, r); d > 0 {
							fails++
						}
					}
					cell = fmtP(float64(fails)/float64(trials)) + "*"
				case eps > 0:
					cell = fmtP(1 - math.Exp(-rate*float64(n)))
				default:
					cell = "<" + fmtP(min(1, u*float64(n)))
				}
				line += " " + cell + " |"
			}
			fmt.Println(line)
		}
	}
	fmt.Println()
}

func fmtRate(eps, steps int) string {
	if eps == 0 {
		return fmt.Sprintf("0 in %.0e", float64(steps))
	}
	return fmt.Sprintf("%.1e", float64(eps)/float64(steps))
}

func fmtP(p float64) string {
	switch {
	case p == 0:
		return "0"
	case p >= 0.995:
		return "1"
	case p < 0.001:
		return fmt.Sprintf("%.0e", p)
	default:
		return fmt.Sprintf("%.3f", p)
	}
}

// ---------------------------------------------------------------- cuckoo

type cuckooTable struct {
	n, k   int
	mask   uint64
	slots  []int32 // key index, -1 empty
	keys   []uint64
	seen   []uint32
	search uint32
	q      []hop
	moves  int
	long   int // searches that needed a chain of moves
}

type hop struct {
	b    uint32
	from int32
	slot uint8
}

func newCuckoo(n, k int) *cuckooTable {
	t := &cuckooTable{n: n, k: k, mask: uint64(n - 1), slots: make([]int32, n*k), seen: make([]uint32, n)}
	for i := range t.slots {
		t.slots[i] = -1
	}
	return t
}

// buckets is layout 2's (and layout 3's) choice of candidate buckets.
func (t *cuckooTable) buckets(h uint64) (uint32, uint32) {
	b1 := uint32(h & t.mask)
	b2 := uint32(h >> 32 & t.mask)
	if b1 == b2 {
		b2 = b1 ^ 1
	}
	return b1, b2
}

func (t *cuckooTable) load(b uint32) (int, int) {
	used, first := 0, -1
	for s := 0; s < t.k; s++ {
		if t.slots[int(b)*t.k+s] >= 0 {
			used++
		} else if first < 0 {
			first = s
		}
	}
	return used, first
}

// insert places key index i with layout 2's policy; limit bounds the
// buckets the search may queue (0: unlimited). It reports success.
func (t *cuckooTable) insert(i int32, limit int) bool {
	b1, b2 := t.buckets(t.keys[i])
	n1, f1 := t.load(b1)
	n2, f2 := t.load(b2)
	switch {
	case n1 <= n2 && n1 < t.k:
		t.slots[int(b1)*t.k+f1] = i
		return true
	case n2 < t.k:
		t.slots[int(b2)*t.k+f2] = i
		return true
	}
	if limit == 0 {
		limit = t.n
	}
	t.search++
	q := append(t.q[:0], hop{b: b1, from: -1}, hop{b: b2, from: -1})
	t.seen[b1], t.seen[b2] = t.search, t.search
	found := -1
outer:
	for qi := 0; qi < len(q) && len(q) < limit; qi++ {
		u := q[qi].b
		for s := 0; s < t.k; s++ {
			x := t.slots[int(u)*t.k+s]
			c1, c2 := t.buckets(t.keys[x])
			v := c1
			if v == u {
				v = c2
			}
			if t.seen[v] == t.search {
				continue
			}
			t.seen[v] = t.search
			q = append(q, hop{b: v, from: int32(qi), slot: uint8(s)})
			if n, _ := t.load(v); n < t.k {
				found = len(q) - 1
				break outer
			}
		}
	}
	t.q = q
	if found < 0 {
		return false
	}
	t.long++
	j := found
	var freed int
	for q[j].from >= 0 {
		h := q[j]
		from := q[h.from].b
		src := int(from)*t.k + int(h.slot)
		_, f := t.load(h.b)
		t.slots[int(h.b)*t.k+f] = t.slots[src]
		t.slots[src] = -1
		t.moves++
		freed = src
		j = int(h.from)
	}
	t.slots[freed] = i
	return true
}

func cuckoo(maxlog int) {
	fmt.Println("## cuckoo: two independent buckets, layout 2's placement policy")
	fmt.Println()
	fmt.Println("Keys inserted one by one until the first failure with the everyday 512-bucket search,")
	fmt.Println("then on with an unlimited search (a rebuild's) until the first failure. Loads are keys/slots.")
	fmt.Println("moves/key: moves per insert from empty to 15/16 (everyday search).")
	fmt.Println()
	fmt.Println("| slots/bucket | buckets | trials | first everyday failure: min / mean | unlimited: min / mean | moves/key to 15/16 | inserts needing moves, last 1/16 before 15/16 |")
	fmt.Println("|---|---|---|---|---|---|---|")
	r := rand.New(rand.NewPCG(3, 4))
	for _, k := range []int{4, 8} {
		for lg := 10; lg <= maxlog; lg += 2 {
			n := 1 << lg
			if k == 4 && lg > 16 {
				continue
			}
			trials := max(1, (1<<18)/n)
			unlimitedToo := lg <= 16 // the unlimited search near its threshold is slow
			if lg >= 18 {
				trials = 1
			}
			minE, minU, sumE, sumU := 2.0, 2.0, 0.0, 0.0
			var movesAt, longLate float64
			for range trials {
				t := newCuckoo(n, k)
				slots := n * k
				t.keys = make([]uint64, 0, slots)
				var everyday, unlimited float64
				target := slots - slots/16
				lateFrom := target - slots/16
				var longAtLate int
				for i := 0; ; i++ {
					t.keys = append(t.keys, r.Uint64())
					if i == lateFrom {
						longAtLate = t.long
					}
					lim := 512
					if everyday > 0 {
						lim = 0
					}
					ok := t.insert(int32(i), lim)
					if i+1 == target && everyday == 0 {
						movesAt += float64(t.moves) / float64(target)
						longLate += float64(t.long-longAtLate) / float64(target-lateFrom)
					}
					if !ok && everyday == 0 {
						everyday = float64(i) / float64(slots)
						if !unlimitedToo {
							break
						}
						t.keys = t.keys[:i] // drop it, go on unlimited
						i--
						continue
					}
					if !ok {
						unlimited = float64(i) / float64(slots)
						break
					}
					if i+1 == slots {
						unlimited = 1
						break
					}
				}
				if everyday == 0 {
					everyday = unlimited
				}
				minE, minU = min(minE, everyday), min(minU, unlimited)
				sumE += everyday
				sumU += unlimited
			}
			tr := float64(trials)
			unl := "not run"
			if unlimitedToo {
				unl = fmt.Sprintf("%.4f / %.4f", minU, sumU/tr)
			}
			fmt.Printf("| %d | 2^%d | %d | %.4f / %.4f | %s | %.3f | %.3f |\n",
				k, lg, trials, minE, sumE/tr, unl, movesAt/tr, longLate/tr)
		}
	}
	fmt.Println()
}

// ---------------------------------------------------------------- arena

// arenaModel: n buckets, each with an arena of cap bytes; superseded
// records' bytes stay in limbo for one inline grace period. Fragmentation
// inside an arena is not modelled (bytes only); see the doc. Two policies:
// own (layout 3's rule): a key's inline record lives in the arena of the
// bucket that holds its slot (slots placed by the cuckoo policy above);
// either: in the arena of either candidate bucket, whichever has more free
// bytes (the alternative the doc rejects).
type arenaModel struct {
	n, cap     int
	either     bool
	live, limb []int
	keyB       []int32 // arena of each key's record, -1: spilled to the record area
	keyLen     []int
	keyH       []uint64
	home       []int32 // own policy: the bucket holding the key's slot
	limbo      []limboRec
	head       int
}

type limboRec struct {
	b   int32
	len int
	exp float64
}

func (m *arenaModel) free(b int) int { return m.cap - m.live[b] - m.limb[b] }

// place puts key i's record of n bytes into an arena, or returns -1 (spill).
func (m *arenaModel) place(i, n int) int32 {
	b := int(m.home[i])
	if m.either {
		mask := uint64(m.n - 1)
		h := m.keyH[i]
		b1, b2 := int(h&mask), int(h>>32&mask)
		if b1 == b2 {
			b2 = b1 ^ 1
		}
		b = b1
		if m.free(b2) > m.free(b1) {
			b = b2
		}
	}
	if m.free(b) < n {
		return -1
	}
	m.live[b] += n
	return int32(b)
}

func (m *arenaModel) expire(now float64) {
	for m.head < len(m.limbo) && m.limbo[m.head].exp <= now {
		e := m.limbo[m.head]
		m.limb[e.b] -= e.len
		m.head++
	}
	if m.head > 1<<20 && m.head > len(m.limbo)/2 {
		m.limbo = append(m.limbo[:0], m.limbo[m.head:]...)
		m.head = 0
	}
}

func arena() {
	fmt.Println("## arena: small records inline in bucket arenas")
	fmt.Println()
	fmt.Println("2^16 buckets of 8 slots at the key capacity (15/16 of the slots: 7.5 keys per bucket),")
	fmt.Println("slots placed by the cuckoo policy above. a = inline bytes per slot (the threshold; 320 here,")
	fmt.Println("but only sizes relative to a matter), arena = c*a bytes per bucket. Policy own (proposed): a")
	fmt.Println("record lives in the arena of its slot's bucket; either: in whichever candidate arena has")
	fmt.Println("more free bytes. Superseded bytes stay in limbo one inline grace period. u = updates per key")
	fmt.Println("per inline grace period (uniform keys; with the proposed 100 ms inline grace, u = 1 is every")
	fmt.Println("key updated 10 times a second). Spilled writes: updates whose record went to the record area;")
	fmt.Println("spilled keys: keys out of place at the end (their uncached GETs take 2 round trips).")
	fmt.Println()
	fmt.Println("| policy | record size | c (arena = c*a) | u | initial fill: keys spilled | spilled writes | spilled keys at end |")
	fmt.Println("|---|---|---|---|---|---|---|")
	const lg = 16
	n := 1 << lg
	r := rand.New(rand.NewPCG(5, 6))
	// Slots: fill a cuckoo table to the key capacity.
	t := newCuckoo(n, 8)
	keys := n * 8 * 15 / 16
	t.keys = make([]uint64, keys)
	for i := range keys {
		t.keys[i] = r.Uint64()
		if !t.insert(int32(i), 512) {
			panic("cuckoo fill failed below the key capacity")
		}
	}
	home := make([]int32, keys)
	for j, x := range t.slots {
		if x >= 0 {
			home[x] = int32(j / 8)
		}
	}
	const a = 320
	sizes := []struct {
		name string
		f    func(r *rand.Rand) int
	}{
		{"all = a (worst case)", func(*rand.Rand) int { return a }},
		{"uniform 64..a", func(r *rand.Rand) int { return 64 + 8*r.IntN((a-64)/8+1) }},
		{"all = a/2", func(*rand.Rand) int { return a / 2 }},
	}
	for _, either := range []bool{false, true} {
		pol := "own"
		if either {
			pol = "either"
		}
		for _, sz := range sizes {
			for _, c := range []int{8, 9, 10, 12} {
				if either && c != 10 && c != 8 {
					continue
				}
				for _, u := range []float64{0, 0.1, 1, 4} {
					m := &arenaModel{n: n, cap: c * a, either: either, live: make([]int, n), limb: make([]int, n),
						keyB: make([]int32, keys), keyLen: make([]int, keys), keyH: t.keys, home: home}
					spill0 := 0
					for i := range keys {
						m.keyLen[i] = sz.f(r)
						m.keyB[i] = m.place(i, m.keyLen[i])
						if m.keyB[i] < 0 {
							spill0++
						}
					}
					spilledW, writes := 0, 0
					if u > 0 {
						// Updates as a Poisson stream: keys*u per grace period, for 8 grace periods.
						total := int(float64(keys) * u * 8)
						dt := 1 / (float64(keys) * u)
						now := 0.0
						for range total {
							now += dt
							m.expire(now)
							i := r.IntN(keys)
							old, oldLen := m.keyB[i], m.keyLen[i]
							m.keyLen[i] = sz.f(r)
							// The old record is superseded after the new one is written, so
							// its bytes are still held while the new one is placed.
							nb := m.place(i, m.keyLen[i])
							if old >= 0 {
								m.live[old] -= oldLen
								m.limb[old] += oldLen
								m.limbo = append(m.limbo, limboRec{b: old, len: oldLen, exp: now + 1})
							}
							m.keyB[i] = nb
							writes++
							if nb < 0 {
								spilledW++
							}
						}
					}
					spillEnd := 0
					for i := range keys {
						if m.keyB[i] < 0 {
							spillEnd++
						}
					}
					sw := "-"
					if writes > 0 {
						sw = fmtFrac(float64(spilledW) / float64(writes))
					}
					fmt.Printf("| %s | %s | %d | %g | %s | %s | %s |\n", pol, sz.name, c, u,
						fmtFrac(float64(spill0)/float64(keys)), sw, fmtFrac(float64(spillEnd)/float64(keys)))
				}
			}
		}
	}
	fmt.Println()
	fmt.Println("A single hot key updated w times per inline grace period needs about w records of limbo in")
	fmt.Println("its own arena; with c*a arena bytes and 8 resident max-size records, c-8 of them exist:")
	fmt.Println("beyond that its updates spill.")
	fmt.Println()
}

func fmtFrac(p float64) string {
	if p == 0 {
		return "0"
	}
	if p < 0.001 {
		return fmt.Sprintf("%.1e", p)
	}
	return fmt.Sprintf("%.2f%%", 100*p)
}

// ---------------------------------------------------------------- memory

func pad8(n int) int { return (n + 7) &^ 7 }

// inlineLen is the length of an inline record in layout 3's tagged
// format: word 0 (crc, state, tag), then the payload (version 8, keyLen 2,
// valueLen 4, key, value) 7 bytes to a word, each word's top byte the tag.
func inlineLen(k, v int) int { return 8 * (1 + (14+k+v+6)/7) }

// stride is layout 3's bucket: 64 B of slots and an arena of 10a,
// rounded up to a multiple of 64.
func stride(a int) int { return (64 + 10*a + 63) &^ 63 }

func memory() {
	fmt.Println("## memory: bytes of region per key at the key capacity (15/16 of slots)")
	fmt.Println()
	fmt.Println("16-byte keys. Layout 2: the key's slot share (8 B / (15/16)) plus its record (24 B header +")
	fmt.Println("key + value, padded to 8). Layout 3 with inline budget a bytes per slot: the bucket")
	fmt.Println("(64 B of slots + arena of 10a, rounded up to 64 B) per 7.5 keys, plus the record (layout 2's")
	fmt.Println("format) if it is out of place; inline records use the tagged format (8 B + 8 B per 7 payload")
	fmt.Println("bytes). This counts the bytes a full table uses per key; it assumes the region is sized so")
	fmt.Println("that buckets and records fill together, as the sizing knobs allow.")
	fmt.Println()
	values := []int{16, 64, 256, 4096, 1 << 20}
	inl := []int{64, 144, 352}
	var cols []string
	for _, a := range inl {
		cols = append(cols, fmt.Sprintf("layout 3, a=%d", a), "ratio")
	}
	printHeader([]string{"value", "record (inline form)", "layout 2"}, cols)
	for _, v := range values {
		rec := pad8(24 + 16 + v)
		il := inlineLen(16, v)
		v2 := 8.0*16/15 + float64(rec)
		line := fmt.Sprintf("| %s | %d (%d) | %.1f |", human(v), rec, il, v2)
		for _, a := range inl {
			v3 := float64(stride(a)) / 7.5
			where := "inline"
			if il > a {
				v3 += float64(rec)
				where = "out of place"
			}
			line += fmt.Sprintf(" %.1f (%s) | %.2fx |", v3, where, v3/v2)
		}
		fmt.Println(line)
	}
	fmt.Println()
	fmt.Println("Largest value inline under a 16-byte key: " + strings.Join(func() []string {
		var out []string
		for _, a := range inl {
			out = append(out, fmt.Sprintf("a=%d: %d B", a, (a/8-1)*7-14-16))
		}
		return out
	}(), ", ") + ".")
	fmt.Println()
	fmt.Println("READ bytes per uncached GET (two buckets): " + strings.Join(func() []string {
		var out []string
		for _, a := range append([]int{0}, inl...) {
			out = append(out, fmt.Sprintf("a=%d: %d B", a, 2*stride(a)))
		}
		return out
	}(), ", ") + "; layout 2: header + 2 buckets = 192 B, then the record.")
	fmt.Println()
}

func human(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

// printHeader prints a markdown table's header and separator rows.
func printHeader(first, more []string) {
	cols := append(append([]string{}, first...), more...)
	fmt.Println("| " + strings.Join(cols, " | ") + " |")
	fmt.Println(strings.Repeat("|---", len(cols)) + "|")
}
