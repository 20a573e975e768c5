#!/bin/sh
# Raw rxe latency for ratios: ib_read_lat and ib_send_lat, 2 bytes, server
# and client in this VM over rxe0. Prints one RDMAVM-PERF line per test:
#   RDMAVM-PERF: <test> bytes=2 iters=N min=.. typical=.. avg=.. p99=.. (usec)
iters=${PERF_ITERS:-2000}
fail=0
for t in ib_read_lat ib_send_lat; do
	$t -d "$RDMAVM_DEV" -n "$iters" >/tmp/$t.server 2>&1 &
	spid=$!
	ok=0
	for try in 1 2 3 4 5 6 7 8 9 10; do
		sleep 1
		if $t -d "$RDMAVM_DEV" -n "$iters" 127.1.0.1 >/tmp/$t.client 2>&1; then ok=1; break; fi
		kill -0 $spid 2>/dev/null || break
	done
	wait $spid
	src=$?
	if [ $ok -ne 1 ] || [ $src -ne 0 ]; then
		echo "perftest: $t failed (client ok=$ok, server rc=$src)"
		cat /tmp/$t.client /tmp/$t.server
		fail=1
		continue
	fi
	# The result row is the one that starts with the message size.
	awk -v t="$t" '$1 == 2 && NF >= 9 {printf "RDMAVM-PERF: %s bytes=%s iters=%s min=%s typical=%s avg=%s p99=%s (usec)\n", t, $1, $2, $3, $5, $6, $8}' /tmp/$t.client
done
exit $fail
