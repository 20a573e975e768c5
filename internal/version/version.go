package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Version, when set at link time, overrides the version read from the
// build info: the Makefile sets it to `git describe --always --dirty`,
//
//	go build -ldflags "-X github.com/kvd-project/kvd/internal/version.Version=v1.2.3"
//
// A `go build` without it, or a `go install module@version`, still has
// a version: the module's, or the revision the build info records.
//
// Revision likewise overrides the VCS revision (the Makefile sets it to
// `git rev-parse HEAD`), for builds that record none (-buildvcs=false, or
// a tree without .git). Both are set only by the linker, never at run time.
var Version, Revision string

// Info describes a build.
type Info struct {
	Version   string // Version, else the module version, else "devel"
	Revision  string // the VCS revision, with "-dirty" if the tree was modified ("" if unknown)
	GoVersion string
	Platform  string // GOOS/GOARCH
}

// Get returns this binary's Info.
func Get() Info {
	i := Info{Version: Version, Revision: Revision, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		if i.Version == "" {
			i.Version = "devel"
		}
		return i
	}
	var modified bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			i.Revision = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if modified && i.Revision != "" {
		i.Revision += "-dirty"
	}
	if Revision != "" {
		i.Revision = Revision
	}
	if i.Version == "" {
		i.Version = moduleVersion(bi.Main.Version, i.Revision)
	}
	return i
}

// moduleVersion is the version a build without the -X override reports:
// the module's (a `go install ...@v1.2.3`), else the revision's first 12
// characters (a `go build` in a checkout), else "devel".
func moduleVersion(mod, rev string) string {
	if mod != "" && mod != "(devel)" {
		return mod
	}
	if rev != "" {
		short, dirty := strings.CutSuffix(rev, "-dirty")
		if len(short) > 12 {
			short = short[:12]
		}
		if dirty {
			short += "-dirty"
		}
		return "devel-" + short
	}
	return "devel"
}

// String is what `kvd --version` prints, as etcd's --version does: one
// "Name: value" line each.
func (i Info) String() string {
	rev := i.Revision
	if rev == "" {
		rev = "unknown"
	}
	return fmt.Sprintf("Version: %s\nGit SHA: %s\nGo Version: %s\nGo OS/Arch: %s\n",
		i.Version, rev, i.GoVersion, i.Platform)
}
