// Package report renders a result.Report as markdown: the throughput and
// latency table, per-operation latencies with their ratios to the raw
// transport baselines, the baselines themselves, and the comparison of
// one-sided with RPC GETs (throughput, latency, server CPU and round trips
// per GET). What every column means is in bench/README.md.
package report
