package stats

import (
	"slices"
	"testing"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []float64
		want float64
	}{
		{"none", nil, 0},
		{"one", []float64{7}, 7},
		{"odd count, unsorted", []float64{9, 1, 5}, 5},
		{"even count: mean of the middle two", []float64{4, 1, 3, 2}, 2.5},
		{"an outlier does not move it", []float64{41, 42, 43, 400}, 42.5},
	} {
		in := slices.Clone(tc.in)
		if got := Median(in); got != tc.want {
			t.Errorf("%s: Median(%v) = %v, want %v", tc.name, tc.in, got, tc.want)
		}
		if !slices.Equal(in, tc.in) {
			t.Errorf("%s: Median reordered its input to %v", tc.name, in)
		}
	}
}
