package etcdapi

import (
	"math"
	"testing"

	"github.com/kvd-project/kvd/client"
)

func TestRevisionNumberingIsKvdsPlusOne(t *testing.T) {
	for _, c := range []struct {
		kvd  uint64
		etcd int64
	}{
		{0, 1}, // the empty store
		{1, 2}, // the first write
		{41, 42},
		{math.MaxInt64 - 1, math.MaxInt64},
	} {
		if got := etcdRev(c.kvd); got != c.etcd {
			t.Errorf("etcdRev(%d) = %d, want %d", c.kvd, got, c.etcd)
		}
		if got := kvdRev(c.etcd); got != c.kvd {
			t.Errorf("kvdRev(%d) = %d, want %d", c.etcd, got, c.kvd)
		}
	}
	for _, c := range []struct {
		etcd int64
		kvd  uint64
	}{{0, 0}, {-1, 0}, {math.MinInt64, 0}} {
		if got := kvdRev(c.etcd); got != c.kvd {
			t.Errorf("kvdRev(%d) = %d, want %d", c.etcd, got, c.kvd)
		}
	}
	if got := etcdRev(math.MaxUint64); got != math.MaxInt64 {
		t.Errorf("etcdRev(MaxUint64) = %d, want MaxInt64 (no overflow)", got)
	}
}

func TestKeyRevisionKeepsAbsentZero(t *testing.T) {
	for _, c := range []struct {
		kvd  uint64
		etcd int64
	}{{0, 0}, {1, 2}, {7, 8}} {
		if got := keyRev(c.kvd); got != c.etcd {
			t.Errorf("keyRev(%d) = %d, want %d", c.kvd, got, c.etcd)
		}
	}
}

func TestWatchStartRevisionInKvdNumbering(t *testing.T) {
	for _, c := range []struct {
		name  string
		start int64
		cur   uint64
		want  uint64
	}{
		{"0: from now", 0, 9, 10},
		{"0 on an empty store", 0, 0, 1},
		{"1: nothing happened there, the first write on", 1, 9, 1},
		{"2: kvd's first write", 2, 9, 1},
		{"past", 6, 9, 5},
		{"future", 20, 9, 19},
	} {
		if got := watchFrom(c.start, c.cur); got != c.want {
			t.Errorf("%s: watchFrom(%d, %d) = %d, want %d", c.name, c.start, c.cur, got, c.want)
		}
	}
}

func TestRevisionCompareInKvdNumbering(t *testing.T) {
	for _, c := range []struct {
		name   string
		op     client.CmpOp
		num    int64
		wantOp client.CmpOp
		want   uint64
	}{
		{"absent stays 0", client.CmpEqual, 0, client.CmpEqual, 0},
		{"a live key's", client.CmpEqual, 5, client.CmpEqual, 4},
		{"greater", client.CmpGreater, 2, client.CmpGreater, 1},
		{"less than 1: absent", client.CmpLess, 1, client.CmpLess, 1},
		{"greater than 1: live", client.CmpGreater, 1, client.CmpGreater, 0},
		{"equal to 1: no key", client.CmpEqual, 1, client.CmpEqual, math.MaxUint64},
		{"not equal to 1: every key", client.CmpNotEqual, 1, client.CmpNotEqual, math.MaxUint64},
	} {
		op, rev := cmpRev(c.op, c.num)
		if op != c.wantOp || rev != c.want {
			t.Errorf("%s: cmpRev(%v, %d) = %v, %d; want %v, %d", c.name, c.op, c.num, op, rev, c.wantOp, c.want)
		}
	}
}
