// Command kvbench benchmarks a kvd cluster through the Go client and
// compares it with raw transport round trips.
//
//	kvbench run [flags]            measure a sweep of workloads (the default)
//	kvbench baseline-tcp [flags]   TCP request/response ping-pong over loopback
//	kvbench perftest [flags]       parse or run perftest (ib_read_lat, ib_send_lat)
//	kvbench report [flags] FILE... merge result files into one report with plots
//	kvbench floor [flags]          the cheapest replicated PUT here (bench/floor):
//	                               3 bare processes, a floor under kvd's PUT CPU
//	kvbench writepath [flags]      the floor, the Pebble and state floors and kvd per Raft log
//	                               (and a baseline build) in rotated rounds, medians
//	                               and ratios (bench/writepath)
//	kvbench redis [flags]          redis-benchmark against kvd's gateway, a node,
//	                               a minimal Go RESP server and redis-server
//	                               (bench/redisbench)
//	kvbench resp-floor [flags]     that Go RESP server alone (bench/respfloor)
//
// Every flag can also be set through an environment variable: KVBENCH_
// plus the flag name in upper case with dashes as underscores
// (--start-cluster → KVBENCH_START_CLUSTER). See bench/README.md.
package main
