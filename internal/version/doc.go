// Package version is the one place kvd's commands learn what build they are:
// the version (a release tag, or `git describe` of the tree the Makefile
// built), the VCS revision and the Go toolchain. kvd prints it for
// --version, serves it on /version and as kvd_build_info; kvctl prints it
// for `kvctl version`.
package version
