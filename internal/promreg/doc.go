// Package promreg registers a component's Prometheus collectors as one
// set: all or none, and removable again so that a component closed and
// reopened on the same Registerer can register anew.
package promreg
