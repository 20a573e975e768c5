package promreg

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func counter(name string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: name})
}

// TestRegisterAllOrNone checks a set with one clash leaves nothing of
// itself registered, and that an unregistered set can register again.
func TestRegisterAllOrNone(t *testing.T) {
	reg := prometheus.NewRegistry()
	taken := counter("b_total")
	if err := Register(reg, []prometheus.Collector{taken}); err != nil {
		t.Fatal(err)
	}
	a := counter("a_total")
	if err := Register(reg, []prometheus.Collector{a, counter("b_total")}); err == nil {
		t.Fatal("a clashing set registered")
	}
	if err := reg.Register(a); err != nil {
		t.Fatalf("a failed set left a registered: %v", err)
	}
	Unregister(reg, []prometheus.Collector{a, taken})
	if err := Register(reg, []prometheus.Collector{a, taken}); err != nil {
		t.Fatalf("register after unregister: %v", err)
	}
	if err := Register(nil, []prometheus.Collector{a}); err != nil {
		t.Fatal(err)
	}
	Unregister(nil, []prometheus.Collector{a})
}
