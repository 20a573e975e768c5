// Package stats holds the summary statistics the benchmark reports share,
// so that every report takes, say, a median the same way.
package stats
