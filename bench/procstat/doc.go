// Package procstat reads how much CPU time processes have used, from
// Linux's /proc/PID/stat, so a benchmark can charge server CPU to the
// operations that caused it. It owns the parsing of those files and of the
// clock tick rate they are counted in, and reads the machine's load
// average, which says how much else was running.
package procstat
