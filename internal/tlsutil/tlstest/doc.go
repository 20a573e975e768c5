// Package tlstest makes certificates for tests, in Go (crypto/x509): a CA,
// and leaves it signs for servers, peers and clients, valid for loopback.
// Keys are ECDSA P-256, quick to generate.
package tlstest
