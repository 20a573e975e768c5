// Package ratelog keeps refusal logging from becoming a hostile peer's
// amplifier: it lets one log line per kind through per interval and counts
// the lines it held back, so the next line can say how many. Metrics count
// every event; the log only samples them.
package ratelog
