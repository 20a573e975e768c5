package plot

import (
	"math"
	"strconv"

	"gonum.org/v1/plot"
)

// nines maps a percentile onto the "number of nines" axis: 90 → 1,
// 99 → 2, 99.9 → 3.
func nines(pct float64) float64 { return -math.Log10(1 - pct/100) }

var ninesTicks = plot.TickerFunc(func(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for k := 0; float64(k) <= hi+1e-9; k++ {
		label := "0%"
		if k > 0 {
			label = strconv.FormatFloat(100*(1-math.Pow10(-k)), 'f', max(0, k-2), 64) + "%"
		}
		ts = append(ts, plot.Tick{Value: float64(k), Label: label})
	}
	return ts
})

var powersOfTwo = plot.TickerFunc(func(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for v := 1.0; v <= hi*1.0001; v *= 2 {
		if v >= lo*0.9999 {
			ts = append(ts, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', -1, 64)})
		}
	}
	return ts
})

var powersOfFour = plot.TickerFunc(func(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for v := 1.0; v <= hi*1.0001; v *= 4 {
		if v >= lo*0.9999 {
			ts = append(ts, plot.Tick{Value: v, Label: sizeLabel(int(v))})
		}
	}
	return ts
})

func sizeLabel(n int) string {
	switch {
	case n >= 1<<20:
		return strconv.Itoa(n>>20) + "Mi"
	case n >= 1<<10:
		return strconv.Itoa(n>>10) + "Ki"
	}
	return strconv.Itoa(n)
}

// plainTicks are gonum's default ticks with labels in plain digits
// ("125000", not "125000.00").
var plainTicks = plot.TickerFunc(func(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'f', -1, 64)
		}
	}
	return ts
})

// logTicks labels 1, 2 and 5 times each power of ten in plain digits.
var logTicks = plot.TickerFunc(func(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		for m := 1; m < 10; m++ {
			v := float64(m) * math.Pow(10, e)
			if v < lo*0.999 || v > hi*1.001 {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || m == 2 || m == 5 {
				t.Label = strconv.FormatFloat(v, 'f', -1, 64)
			}
			ts = append(ts, t)
		}
	}
	return ts
})
