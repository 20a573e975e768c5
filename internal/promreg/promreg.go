package promreg

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers every collector of cs with reg (nil: none). If any
// fails, it unregisters them all again and returns the failures.
func Register(reg prometheus.Registerer, cs []prometheus.Collector) error {
	if reg == nil {
		return nil
	}
	var errs []error
	for _, c := range cs {
		errs = append(errs, reg.Register(c))
	}
	if err := errors.Join(errs...); err != nil {
		Unregister(reg, cs)
		return err
	}
	return nil
}

// Unregister removes every collector of cs from reg (nil: none).
func Unregister(reg prometheus.Registerer, cs []prometheus.Collector) {
	if reg == nil {
		return
	}
	for _, c := range cs {
		reg.Unregister(c)
	}
}
