package version

import (
	"strings"
	"testing"
)

// TestModuleVersion: a build without the -X override still names a
// version an operator can trace: the module's, else the revision's.
func TestModuleVersion(t *testing.T) {
	for _, tc := range []struct{ mod, rev, want string }{
		{"v1.2.3", "0123456789abcdef0123", "v1.2.3"},
		{"(devel)", "0123456789abcdef0123", "devel-0123456789ab"},
		{"(devel)", "0123456789abcdef0123-dirty", "devel-0123456789ab-dirty"},
		{"", "", "devel"},
	} {
		if got := moduleVersion(tc.mod, tc.rev); got != tc.want {
			t.Errorf("moduleVersion(%q, %q) = %q, want %q", tc.mod, tc.rev, got, tc.want)
		}
	}
}

// TestOverrideWins: the version the Makefile links in (-X) is the one
// reported.
func TestOverrideWins(t *testing.T) {
	old := Version
	defer func() { Version = old }()
	Version = "v9.9.9-test"
	i := Get()
	if i.Version != "v9.9.9-test" || !strings.HasPrefix(i.String(), "Version: v9.9.9-test\n") {
		t.Fatalf("Get() = %+v, String %q", i, i.String())
	}
}
