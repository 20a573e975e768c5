// Package tlsutil loads kvd's TLS material (certificates, keys and CA
// bundles in PEM files, named by etcd's flags), hands it to the tcp
// transport, and reloads it without a restart: on Reload (kvd calls it on
// SIGHUP) and whenever Watch sees a file's contents change. A reload that
// fails (a file missing or half written, a key that does not match its
// certificate, an expired certificate) is logged and the material in use is
// kept; new connections use the new material once it loads, established ones
// keep theirs.
//
// It also decides which client certificates are read-only: those with the
// organizational unit ReadOnlyOU in their subject, and those whose common
// name is in ServerFiles.ReadOnlyCNs.
package tlsutil
