// Package revision defines kvd's per-key revision metadata, as etcd's data
// model has it, and its one binary encoding, shared by the values in Pebble,
// the records of the table region and the wire.
//
// Every applied request that changes state advances the store revision by
// exactly one, and everything it writes carries that revision. A key's Meta
// says when it was created (Create: the revision of the write that created
// it, since it last did not exist), when it last changed (Mod), how many
// times it was written since it was created (Version: 1 for a fresh key, 0
// for no key), and the TTL lease it is attached to (Lease, 0 for none).
package revision
