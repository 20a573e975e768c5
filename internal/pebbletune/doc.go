// Package pebbletune holds the Pebble tuning kvd's store runs with, so that
// whatever else opens Pebble to stand in for that store (the benchmark
// floor's Pebble mode) runs with the same.
package pebbletune
