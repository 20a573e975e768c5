// Package limits owns the sizes and counts kvd bounds a request by: keys
// and values, transactions, TTL leases, scan pages, get-many batches and
// watch messages. Each is stated here once; the table layout, the state
// machine, the wire, the server and the client (which re-exports them, as
// client.MaxKey, client.MaxTxnOps, ...) all use these constants.
//
// They are constants, not settings: every node decides alike when it
// applies an entry, and a client can check a request before sending it.
package limits
