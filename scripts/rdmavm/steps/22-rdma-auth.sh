#!/bin/sh
# RDMA connection authentication (--rdma-auth-file).
#
# 1. The transport's tests on real queue pairs: a client with the right key
#    connects and reads; a wrong key, an unknown name, no key, or a dialer
#    that skips the handshake is refused, never handed to Accept (so never
#    sent a region descriptor) and cannot READ even knowing the rkey; limits
#    on unauthenticated connections; identities and roles as reported; rkeys
#    new after a restart; regions refuse remote WRITE.
# 2. End to end: a 3-node kvd cluster over RDMA whose members authenticate
#    each other with peer keys; kvctl with an rw key writes and reads, with
#    an ro key reads but its PUT is refused (kvd: permission denied), with a
#    wrong key or none gets nothing; a server refuses to run on a non-peer
#    key. Prints RDMAVM-AUTH: lines.
gotest transport-rdma.test -test.count=1 -test.timeout=240s -test.run '^(TestAuthConnectAndRead|TestAuthRefusesWrongKey|TestAuthRefusesNoKey|TestAuthUnauthenticatedQPCannotRead|TestAuthLimitsUnauthenticated|TestAuthIdentityRoles|TestRegionKeyFreshAcrossRestart|TestRegionRemoteReadOnly)$' || exit 1

A=$RDMAVM_ADDR
D=/tmp/auth
mkdir -p $D
key() { od -An -N32 -tx1 /dev/urandom | tr -d ' \n'; }
umask 077
for n in node1:peer node2:peer node3:peer alice:rw bob:ro; do echo "$n:$(key)"; done >$D/keys
grep '^alice:' $D/keys >$D/alice
grep '^bob:' $D/keys >$D/bob
echo "alice:rw:$(key)" >$D/wrong
cluster=1=$A:7301,2=$A:7302,3=$A:7303
for i in 1 2 3; do
	kvd --id $i --listen $A:730$i --data-dir $D/data$i --initial-cluster $cluster \
		--transport rdma --rdma-device "$RDMAVM_DEV" --rdma-auth-file $D/keys --rdma-auth-name node$i \
		>$D/kvd$i.log 2>&1 &
done
fail=0
check() { # check NAME OK|FAIL WANT-IN-OUTPUT COMMAND...
	name=$1 want=$2 text=$3
	shift 3
	out=$("$@" 2>&1)
	rc=$?
	if { [ $want = OK ] && [ $rc -eq 0 ]; } || { [ $want = FAIL ] && [ $rc -ne 0 ]; }; then
		case $out in
		*"$text"*) echo "RDMAVM-AUTH: $name: ok ($(echo "$out" | head -n1 | cut -c1-150))"; return ;;
		esac
	fi
	echo "RDMAVM-AUTH: $name: FAILED (rc $rc, want $want and \"$text\"): $out"
	fail=1
}
kv() { kvctl --transport rdma --rdma-device "$RDMAVM_DEV" --endpoints $A:7301,$A:7302,$A:7303 "$@"; }

# The members find each other (their peer connections authenticate) and
# elect a leader: the first PUT through alice succeeds.
ok=0
for _ in $(seq 60); do
	if kv --rdma-auth-file $D/alice --timeout 5s put hello world >/dev/null 2>&1; then ok=1; break; fi
	sleep 1
done
if [ $ok -ne 1 ]; then
	echo "RDMAVM-AUTH: cluster: FAILED (no PUT succeeded in 60s)"
	tail -n 20 $D/kvd*.log
	exit 1
fi
echo "RDMAVM-AUTH: cluster of 3 peers authenticated, leader elected: ok"
check "rw key reads" OK world kv --rdma-auth-file $D/alice get hello
check "ro key reads" OK world kv --rdma-auth-file $D/bob get hello
check "ro key cannot write" FAIL "permission denied" kv --rdma-auth-file $D/bob --timeout 5s put hello bob
check "rw key still sees its value" OK world kv --rdma-auth-file $D/alice get hello
check "wrong key refused" FAIL "kvd: unauthenticated" kv --rdma-auth-file $D/wrong --timeout 30s get hello
check "no key refused" FAIL "kvd: unauthenticated" kv --timeout 30s get hello
check "server on a non-peer key refused" FAIL "must be a peer key" \
	kvd --id 4 --listen $A:7304 --initial-cluster 4=$A:7304 --data-dir $D/data4 --transport rdma --rdma-device "$RDMAVM_DEV" \
	--rdma-auth-file $D/keys --rdma-auth-name alice
if grep -q "refused a connection" $D/kvd*.log; then
	echo "RDMAVM-AUTH: servers logged the refusals: ok"
else
	echo "RDMAVM-AUTH: servers logged the refusals: FAILED"
	fail=1
fi
[ $fail -eq 0 ] || tail -n 20 $D/kvd*.log
exit $fail
