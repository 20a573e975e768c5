package main

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/kvd-project/kvd/client"
)

// jsonID is a lease, member or cluster ID in -w json output: a decimal
// string, not a number. IDs use all 64 bits, and jq and JavaScript read
// JSON numbers as doubles, which round any integer above 2^53; a string
// comes back exactly, and every command that takes an ID takes it as
// given (parseUint64ID). Versions, indexes and terms stay numbers: they
// count Raft entries, which stay far below 2^53.
type jsonID uint64

func (id jsonID) MarshalJSON() ([]byte, error) {
	return strconv.AppendQuote(nil, strconv.FormatUint(uint64(id), 10)), nil
}

// parseUint64ID reads an ID as kvctl prints it: decimal, or hexadecimal
// with a 0x prefix. One pair of surrounding double quotes is dropped, so
// what `jq .id` prints (without -r) works too. Bare hexadecimal (etcdctl's
// form) is not taken: an ID of decimal digits only would be read as the
// wrong number.
func parseUint64ID(s string) (uint64, bool) {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		s = s[1 : len(s)-1]
	}
	var v uint64
	var err error
	if h, ok := strings.CutPrefix(strings.ToLower(s), "0x"); ok {
		v, err = strconv.ParseUint(h, 16, 64)
	} else {
		v, err = strconv.ParseUint(s, 10, 64)
	}
	return v, err == nil && v != 0
}

// tableField is a key or value as -w table prints it: as is if it is
// UTF-8 text of printable characters (spaces included) that does not
// start with a double quote, else Go-quoted (\x00, \n, \t, \x1b, \"): a
// terminal control sequence or a newline in a value must not reach the
// terminal or break the table's rows, and a field starting with " is
// always a quoted one.
func tableField(b []byte) string {
	s := string(b)
	if !utf8.ValidString(s) || strings.HasPrefix(s, `"`) {
		return strconv.Quote(s)
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

// idUsage is the message for an ID kvctl cannot read.
func idUsage(what, s string) string {
	return fmt.Sprintf("%s %q: want a positive integer, decimal as kvctl prints it (or hexadecimal with 0x)", what, s)
}

// memberJSON is a member in -w json output, its ID a string (jsonID).
type memberJSON struct {
	client.Member
	ID jsonID `json:"id"` // shadows Member.ID
}

func membersJSON(ms []client.Member) []memberJSON {
	out := make([]memberJSON, len(ms))
	for i, m := range ms {
		out[i] = memberJSON{m, jsonID(m.ID)}
	}
	return out
}

// statusJSON is an endpoint's status in -w json output, its member IDs
// strings (jsonID).
type statusJSON struct {
	endpointStatus
	ID       jsonID `json:"id"`        // shadows NodeStatus.ID
	LeaderID jsonID `json:"leader_id"` // shadows NodeStatus.LeaderID
}

func statusesJSON(st []endpointStatus) []statusJSON {
	out := make([]statusJSON, len(st))
	for i, s := range st {
		out[i] = statusJSON{s, jsonID(s.ID), jsonID(s.LeaderID)}
	}
	return out
}
