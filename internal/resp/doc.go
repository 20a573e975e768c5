// Package resp reads and writes the Redis serialization protocol: RESP2
// and RESP3 (after HELLO 3). The Reader parses the requests a client
// sends (multibulk arrays of bulk strings, and the inline commands a
// terminal sends) within bounds set by Limits, since it reads the
// network; what breaks a bound or the grammar is a *ProtocolError whose
// text is the one Redis replies with before it closes the connection.
// The Writer encodes replies in the version the connection speaks.
package resp
