//go:build linux

package mmap

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mapped reports whether addr is inside a mapping of this process.
func mapped(t *testing.T, addr uintptr) bool {
	t.Helper()
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var lo, hi uintptr
		if _, err := fmt.Sscanf(sc.Text(), "%x-%x", &lo, &hi); err == nil && lo <= addr && addr < hi {
			return true
		}
	}
	return false
}

// hugePagesFree is /proc/meminfo's HugePages_Free (-1 if unknown).
func hugePagesFree() int {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "HugePages_Free:" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	return -1
}

// checkHuge checks memory from AllocHuge(size): length, zeroed, writable;
// then frees it and checks it is unmapped.
func checkHuge(t *testing.T, b []byte, size int) {
	t.Helper()
	if len(b) != size || cap(b) < size {
		t.Fatalf("len %d cap %d, want len %d", len(b), cap(b), size)
	}
	for i, c := range b[:cap(b)] {
		if c != 0 {
			t.Fatalf("byte %d = %d, want 0", i, c)
		}
	}
	b[0], b[size-1] = 1, 2
	addr := uintptr(unsafe.Pointer(&b[0]))
	if !mapped(t, addr) {
		t.Fatal("allocated memory not in /proc/self/maps")
	}
	if err := Free(b); err != nil {
		t.Fatalf("Free: %v", err)
	}
	if mapped(t, addr) {
		t.Fatal("memory still mapped after Free")
	}
	if err := Free(b); !errors.Is(err, ErrNotMapped) {
		t.Fatalf("second Free = %v, want ErrNotMapped", err)
	}
}

// Without reserved huge pages (this host's default; forced here) AllocHuge
// falls back to ordinary pages advised for transparent huge pages, and
// that memory is freed like any other.
func TestAllocHugeFallback(t *testing.T) {
	calls := 0
	noHugePages := func(int) ([]byte, error) { calls++; return nil, unix.ENOMEM }
	for _, size := range []int{HugePageSize, 3*HugePageSize + 1} {
		b, kind, err := allocHuge(size, noHugePages)
		if err != nil {
			t.Fatalf("AllocHuge(%d) with no huge pages: %v", size, err)
		}
		if kind == HugeTLB {
			t.Fatalf("AllocHuge(%d) = %v, want a fallback", size, kind)
		}
		checkHuge(t, b, size)
	}
	if calls != 2 {
		t.Fatalf("MAP_HUGETLB tried %d times, want 2", calls)
	}
}

// Below one huge page, AllocHuge does not try MAP_HUGETLB (it would round
// a small region up to 2 MiB).
func TestAllocHugeSmall(t *testing.T) {
	refuse := func(int) ([]byte, error) { t.Fatal("MAP_HUGETLB tried for a small size"); return nil, unix.EINVAL }
	b, kind, err := allocHuge(HugePageSize-1, refuse)
	if err != nil || kind == HugeTLB {
		t.Fatalf("AllocHuge(2MiB-1) = %v, %v", kind, err)
	}
	checkHuge(t, b, HugePageSize-1)
	if _, _, err := allocHuge(0, refuse); !errors.Is(err, ErrSize) {
		t.Fatalf("AllocHuge(0) = %v, want ErrSize", err)
	}
}

// The real thing, with whatever this machine has: reserved huge pages are
// used when enough are free, and given back by Free; otherwise the
// fallback.
func TestAllocHugeReal(t *testing.T) {
	const size = 2*HugePageSize + 100 // 3 huge pages
	before := hugePagesFree()
	b, kind, err := AllocHuge(size)
	if err != nil {
		t.Fatalf("AllocHuge: %v", err)
	}
	t.Logf("HugePages_Free %d: got %v", before, kind)
	if want := before >= 3; (kind == HugeTLB) != want {
		t.Fatalf("AllocHuge with %d huge pages free = %v", before, kind)
	}
	if kind == HugeTLB {
		if cap(b)%HugePageSize != 0 || uintptr(unsafe.Pointer(&b[0]))%HugePageSize != 0 {
			t.Fatalf("hugetlb mapping cap %d at %p: not whole, aligned huge pages", cap(b), &b[0])
		}
	}
	checkHuge(t, b, size)
	if after := hugePagesFree(); after != before {
		t.Fatalf("HugePages_Free %d after Free, %d before", after, before)
	}
}
