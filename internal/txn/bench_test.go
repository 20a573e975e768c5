package txn

import "testing"

// BenchmarkApplyCAS is the path of a compare-and-swap and of a PUT with a
// lease: one compare and one write.
func BenchmarkApplyCAS(b *testing.B) {
	s := base()
	t := Txn{Compares: []Compare{{Key: []byte("a"), Target: TargetMod, Cmp: Equal, Num: 5}},
		Then: []Op{{Type: Put, Key: []byte("a"), Value: []byte("v")}}}
	b.ReportAllocs()
	for b.Loop() {
		s.m["a"] = entry{"1", 5}
		if _, err := Apply(s, &t, 9, true); err != nil {
			b.Fatal(err)
		}
	}
}
