"""Smoke test of etcd's API with python3-etcd3, run unmodified.

Usage: etcd3_smoke.py HOST:PORT PREFIX

Prints one line per check ("ok NAME" or "FAIL NAME: why") and exits
non-zero if any check failed. Every key it touches starts with PREFIX.
"""
import queue
import sys
import threading
import traceback

import etcd3

failed = []


def check(name):
    """Runs the decorated function as one check, recording a failure."""
    def run(f):
        try:
            f()
            print("ok", name, flush=True)
        except Exception as e:  # any failure, assertion or RPC, is reported
            failed.append(name)
            print("FAIL %s: %r" % (name, e), flush=True)
            traceback.print_exc(file=sys.stdout)
        return f
    return run


def eq(got, want, what):
    if got != want:
        raise AssertionError("%s: got %r, want %r" % (what, got, want))


host, port = sys.argv[1].rsplit(":", 1)
p = sys.argv[2]
c = etcd3.client(host=host, port=int(port), timeout=10)


@check("put-get")
def _():
    c.put(p + "k", "v1")
    v, meta = c.get(p + "k")
    eq(v, b"v1", "value")
    eq(meta.key, (p + "k").encode(), "key")
    eq(meta.version, 1, "version")
    c.put(p + "k", "v2")
    v, meta = c.get(p + "k")
    eq((v, meta.version), (b"v2", 2), "value and version after a second put")
    eq(c.get(p + "missing"), (None, None), "a missing key")


@check("get-prefix")
def _():
    for i, k in enumerate(["a", "b", "c"]):
        c.put(p + "p/" + k, str(i + 1))
    got = [(m.key, v) for v, m in c.get_prefix(p + "p/")]
    eq(got, [((p + "p/" + k).encode(), str(i + 1).encode()) for i, k in enumerate("abc")], "get_prefix")
    got = [m.key for v, m in c.get_prefix(p + "p/", sort_order="descend")]
    eq(got, [(p + "p/" + k).encode() for k in "cba"], "get_prefix descending")


@check("delete")
def _():
    c.put(p + "d", "x")
    eq(c.delete(p + "d"), True, "delete of a present key")
    eq(c.get(p + "d"), (None, None), "get after delete")
    eq(c.delete(p + "d"), False, "delete of a missing key")
    c.put(p + "d", "y")
    r = c.delete(p + "d", prev_kv=True, return_response=True)
    eq((r.deleted, [kv.value for kv in r.prev_kvs]), (1, [b"y"]), "delete with prev_kv")


@check("delete-prefix")
def _():
    r = c.delete_prefix(p + "p/")
    eq(r.deleted, 3, "deleted")
    eq(list(c.get_prefix(p + "p/")), [], "get_prefix after delete_prefix")


@check("transaction")
def _():
    c.put(p + "t", "v1")
    t = c.transactions
    ok, rs = c.transaction(
        compare=[t.value(p + "t") == "v1", t.version(p + "t") == 1],
        success=[t.put(p + "t", "v2"), t.get(p + "t")],
        failure=[t.put(p + "t", "failed")])
    eq(ok, True, "succeeded")
    eq([v for v, m in rs[1]], [b"v2"], "get in the success branch")
    ok, rs = c.transaction(
        compare=[t.value(p + "t") == "v1"],
        success=[t.put(p + "t", "wrong")],
        failure=[t.get(p + "t"), t.delete(p + "t")])
    eq(ok, False, "succeeded with a false compare")
    eq([v for v, m in rs[0]], [b"v2"], "get in the failure branch")
    eq(rs[1].response_delete_range.deleted, 1, "delete in the failure branch")
    eq(c.get(p + "t"), (None, None), "key after the failure branch")
    eq(c.put_if_not_exists(p + "t", "new"), True, "put_if_not_exists on a missing key")
    eq(c.put_if_not_exists(p + "t", "again"), False, "put_if_not_exists on a present key")
    eq(c.replace(p + "t", "new", "newer"), True, "replace with the right value")
    eq(c.replace(p + "t", "new", "x"), False, "replace with a wrong value")
    eq(c.get(p + "t")[0], b"newer", "value after replace")


@check("lease")
def _():
    lease = c.lease(60)
    eq(lease.ttl, 60, "granted TTL")
    c.put(p + "l", "v", lease=lease)
    eq(c.get(p + "l")[1].lease_id, lease.id, "the key's lease")
    rs = lease.refresh()
    eq([(r.ID, r.TTL) for r in rs], [(lease.id, 60)], "keep-alive responses")
    eq(lease.granted_ttl, 60, "granted_ttl")
    if not 0 < lease.remaining_ttl <= 60:
        raise AssertionError("remaining_ttl %r, want in (0, 60]" % lease.remaining_ttl)
    eq(list(lease.keys), [(p + "l").encode()], "the lease's keys")
    lease.revoke()
    eq(c.get(p + "l"), (None, None), "the key after revoke")
    eq(lease.remaining_ttl, -1, "remaining_ttl of a revoked lease")


@check("watch-callback")
def _():
    events = queue.Queue()
    wid = c.add_watch_callback(p + "w", events.put)
    c.put(p + "w", "1")
    c.delete(p + "w")
    got = []
    for _ in range(2):
        r = events.get(timeout=20)
        if isinstance(r, Exception):
            raise r
        got += [(type(e).__name__, e.key, e.value) for e in r.events]
        if len(got) == 2:
            break
    want = [("PutEvent", (p + "w").encode(), b"1"), ("DeleteEvent", (p + "w").encode(), b"")]
    eq(got, want, "events")
    c.cancel_watch(wid)


@check("watch-prefix-iterator")
def _():
    it, cancel = c.watch_prefix(p + "wp/")
    seen = queue.Queue()

    def consume():
        try:
            for e in it:
                seen.put((type(e).__name__, e.key, e.value))
            seen.put("end")
        except Exception as e:  # reported by the main thread
            seen.put(e)

    th = threading.Thread(target=consume, daemon=True)
    th.start()
    c.put(p + "wp/a", "1")
    c.put(p + "other", "not watched")
    c.put(p + "wp/b", "2")
    got = [seen.get(timeout=20), seen.get(timeout=20)]
    eq(got, [("PutEvent", (p + "wp/a").encode(), b"1"), ("PutEvent", (p + "wp/b").encode(), b"2")], "events")
    cancel()
    eq(seen.get(timeout=20), "end", "the iterator after cancel")
    th.join(timeout=20)
    eq(th.is_alive(), False, "the watching thread is alive after cancel")


@check("watch-once-from-revision")
def _():
    c.put(p + "o", "first")
    rev = c.get(p + "o")[1].mod_revision
    c.put(p + "o", "second")
    e = c.watch_once(p + "o", timeout=20, start_revision=rev)
    eq((e.value, e.mod_revision), (b"first", rev), "the first event from start_revision")


# No c.close(): python3-etcd3 0.12's watch thread has no way to stop, and
# closing the channel under it makes it print a traceback at exit; the
# process ending closes the connection.
if failed:
    print("FAILED:", " ".join(failed), flush=True)
    sys.exit(1)
print("PASS", flush=True)
