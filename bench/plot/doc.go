// Package plot draws kvbench's charts from a result.Report with
// gonum.org/v1/plot: the latency distribution, throughput against
// concurrency, and latency against value size. Every series of the report
// (TCP, RDMA, ...) is drawn on the same axes, so transports compare at a
// glance; raw transport baselines are drawn dashed.
package plot
