package bench

import (
	"fmt"

	"github.com/kvd-project/kvd/bench/workload"
	"github.com/kvd-project/kvd/client"
)

// Sweep is a cross product of parameters around a base point. Empty lists
// take the base point's value.
type Sweep struct {
	Base          Point
	ValueSizes    []int
	Mixes         []workload.Mix
	Consistencies []client.Consistency
	Clients       []int
	Rates         []float64 // open loop only
	// MaxData caps the key space so Keys records of the value size take at
	// most this many bytes (the table must also hold superseded records
	// during the reuse grace, so leave it room). 0: no cap.
	MaxData int64
}

// recordOverhead is a table record's header; see docs/layout.md.
const recordOverhead = 24

func recordSize(keySize, valueSize int) int64 {
	return (int64(recordOverhead+keySize+valueSize) + 7) &^ 7
}

func orDefault[T any](list []T, def T) []T {
	if len(list) == 0 {
		return []T{def}
	}
	return list
}

// Points lists the sweep's points in the order to run them: value size
// outermost, so each key space is preloaded once, then mix, consistency
// (only the first for a mix without GETs: it would measure the same thing),
// clients and rate.
func (s Sweep) Points() []Point {
	var out []Point
	for _, vs := range orDefault(s.ValueSizes, s.Base.Workload.ValueSize) {
		for _, mix := range orDefault(s.Mixes, s.Base.Workload.Mix) {
			for ci, cons := range orDefault(s.Consistencies, s.Base.Consistency) {
				if mix == workload.WriteOnly && ci > 0 {
					break
				}
				for _, c := range orDefault(s.Clients, s.Base.Clients) {
					for _, rate := range orDefault(s.Rates, s.Base.Rate) {
						p := s.Base
						p.Workload.ValueSize, p.Workload.Mix = vs, mix
						p.Consistency, p.Clients, p.Rate = cons, c, rate
						s.capKeys(&p)
						out = append(out, p)
					}
				}
			}
		}
	}
	return out
}

// capKeys shrinks p's key space to fit MaxData, and says so in its note.
func (s Sweep) capKeys(p *Point) {
	w := &p.Workload
	keys := w.Keys
	if keys == 0 {
		keys = workload.DefaultKeys
	}
	ks := w.KeySize
	if ks == 0 {
		ks = workload.DefaultKeySize
	}
	if s.MaxData <= 0 {
		return
	}
	limit := max(1, int(s.MaxData/recordSize(ks, w.ValueSize)))
	if keys > limit {
		w.Keys = limit
		p.Note = fmt.Sprintf("keys capped from %d to %d to fit %d MiB of data", keys, limit, s.MaxData>>20)
	}
}
