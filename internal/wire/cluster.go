package wire

import (
	"fmt"
	"strconv"
	"strings"
)

// ClusterID is a cluster's id (raft/peer derives it when the cluster is
// created). It is printed, and read back, as 16 hex digits, the form the
// nodes' logs and errors use; JSON carries it as that string, since a
// 64-bit number does not survive JSON tools that read numbers as doubles.
type ClusterID uint64

func (c ClusterID) String() string { return fmt.Sprintf("%016x", uint64(c)) }

// ParseClusterID reads a cluster id as String prints it (up to 16 hex
// digits, an optional 0x). 0 is no cluster's id and is refused.
func ParseClusterID(s string) (ClusterID, error) {
	v, err := strconv.ParseUint(strings.TrimPrefix(strings.ToLower(s), "0x"), 16, 64)
	if err != nil || v == 0 {
		return 0, fmt.Errorf("cluster id %q: want the hex id kvctl status prints, e.g. 8e9e05c52164694d", s)
	}
	return ClusterID(v), nil
}

// MarshalText writes the id as String does.
func (c ClusterID) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// UnmarshalText reads an id as ParseClusterID does; "" is 0 (not known).
func (c *ClusterID) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*c = 0
		return nil
	}
	v, err := ParseClusterID(string(b))
	*c = v
	return err
}
