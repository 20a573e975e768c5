package result

import (
	"testing"

	"github.com/kvd-project/kvd/bench/latency"
)

// TestBaselineFromNearestSeries: a run without baselines of its own is
// compared with the series whose name is nearest (vm-tcp-64inst with
// vm-tcp, measured in the same VM), not with whichever came first (the
// host's tcp: 1357× where the VM's own gives 397×).
func TestBaselineFromNearestSeries(t *testing.T) {
	bases := []Baseline{
		{Series: "tcp", Transport: "tcp", Kind: KindTCPRead, Bytes: 256, Lat: latency.Summary{P50: 19.5, P99: 67.1}},
		{Series: "vm-tcp", Transport: "tcp", Kind: KindTCPRead, Bytes: 256, Lat: latency.Summary{P50: 66.6, P99: 239}},
	}
	for _, tc := range []struct{ series, want string }{
		{"vm-tcp-64inst", "vm-tcp"},
		{"tcp-64inst", "tcp"},
		{"vm-tcp", "vm-tcp"},
		{"tcp", "tcp"},
		{"other", "tcp"}, // no nearer series: the first found
	} {
		run := Run{Series: tc.series, Transport: "tcp", Mix: "100/0", ReadPct: 100, Consistency: "linearizable",
			ValueSize: 256, Gets: 100, GetLat: latency.Summary{Count: 100, P50: 26460, P99: 86311}}
		if b, ok := FindBaseline(&run, "get", bases); !ok || b.Series != tc.want {
			t.Errorf("run of series %s compared with series %q's baseline, want %s", tc.series, b.Series, tc.want)
		}
	}
}
