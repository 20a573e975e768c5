// Package baseline measures, or reads, the raw cost of one network round
// trip on each transport, the floor that kvd's latencies are divided by:
//
//   - TCP: a request/response ping-pong over loopback between a tiny echo
//     server and client in this process (TCP), in the two shapes of kvd's
//     operations: a small request with a value-sized reply (like a GET),
//     and a value-sized request with a small reply (like a PUT).
//   - RDMA: the output of perftest's ib_read_lat and ib_send_lat, parsed
//     from files (ParsePerftest) or from runs of the tools on a device
//     (RunPerftest).
package baseline
