package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Version is the framing version this package speaks.
const Version = 1

// Header sizes.
const (
	RequestHeaderLen  = 18
	ResponseHeaderLen = 24
)

// Op names an operation.
type Op uint8

// Operations. New ones are appended; numbers never change meaning.
const (
	OpHello         Op = 1 // learn the node's region descriptor and leader
	OpGet           Op = 2 // two-sided GET (Flags: consistency)
	OpPut           Op = 3
	OpDelete        Op = 4
	OpStatus        Op = 5 // node status as JSON
	OpMemberList    Op = 6 // members as JSON
	OpMemberAdd     Op = 7 // Key: decimal id, Value: address
	OpMemberRemove  Op = 8 // Key: decimal id
	OpMemberPromote Op = 9 // Key: decimal id
	// OpClock reads the node's monotonic clock (Version: nanoseconds, see
	// internal/monoclock), against which clients judge its lease expiry.
	OpClock Op = 10
	// OpTxn runs a transaction (compare-and-swap included) through Raft.
	// Value: the transaction (internal/txn's encoding), Key empty. The
	// response's Version is the entry's Raft index, its Value the outcome
	// (txn.AppendResponse); a transaction that is not allowed is
	// StatusBadRequest.
	OpTxn Op = 11
	// OpScan reads the keys of a range (etcd's Range), one bounded page per
	// request, from the applied state (Flags: consistency; Value: a range
	// request, internal/rangeq, scan.go). The response's Version is the applied index
	// the page was read at, its Value a ScanResponse.
	OpScan Op = 12
	// OpWatch starts a watch: a stream of the PUT and DELETE events of a
	// key or prefix, from now or from a version, answered many times on the
	// request's id (watch.go).
	OpWatch Op = 13
	// OpWatchCancel ends a watch of this connection (Value: its id).
	OpWatchCancel Op = 14
	// TTL leases (lease.go). 13 and 14 are the watch's.
	//
	// OpLeaseGrant: Value a LeaseGrant (TTL, and an id or 0 for the
	// server to pick). Response: Version the lease id.
	OpLeaseGrant Op = 15
	// OpLeaseRevoke: Value the le64 lease id. The lease and every key
	// attached to it are deleted in one Raft entry. Response: Version its
	// Raft index.
	OpLeaseRevoke Op = 16
	// OpLeaseKeepAlive: Value the le64 lease id; served by the leader,
	// which restarts the lease's TTL. Response: Version the TTL in
	// nanoseconds, Value the le64 store revision the leader renewed it
	// at (DecodeLeaseRenewal; empty from a server that predates it).
	OpLeaseKeepAlive Op = 17
	// OpLeaseTimeToLive: Value the le64 lease id; served by the leader.
	// Response: Value a LeaseInfo.
	OpLeaseTimeToLive Op = 18
	// OpSnapshot streams a backup of the applied state from the leader:
	// one request (Key and Value empty), answered by a sequence of
	// responses with its ID, each a bounded chunk of the backup file
	// (snapshot.go). The responses' Version is the backup's index.
	OpSnapshot Op = 19
	// OpGetMany reads several keys at one applied index (an atomic
	// snapshot of them), from the applied state (Flags: consistency;
	// Value: the keys, getmany.go). The response's Version is that index,
	// its Value one answer per key.
	OpGetMany Op = 20
	// OpLeaseList lists the leases that exist, served by the leader after
	// a ReadIndex, one bounded page per request: Value the le64 id to
	// list after (0: from the first). Response: Value a LeaseList
	// (lease.go), ids in ascending order.
	OpLeaseList Op = 21
	// OpMoveLeader hands leadership to another voter (etcd's
	// MoveLeader), served by the leader: Key the target's decimal member
	// id, as the member ops take it. Response: Version the former
	// leader's id, once the target leads.
	OpMoveLeader Op = 22
	// OpCompact compacts the history to a revision (etcd's Compact),
	// served by the leader through Raft: Value the le64 revision.
	// Response: Version the store revision it was applied at; a revision
	// past the store's is StatusFutureRevision, one at or below the
	// compaction revision StatusCompacted.
	OpCompact Op = 23
	// OpDeleteRange deletes the keys k with Key <= k < Value (an empty
	// Value: every key from Key on) in one Raft entry (etcd's
	// DeleteRange). Flags: DeletePrevKV. Response: Version the store
	// revision after it, Value a ScanResponse whose Count is the number
	// deleted and whose entries (with DeletePrevKV) are the deleted keys
	// with their values and metadata.
	OpDeleteRange Op = 24
	// OpHashKV hashes the node's own key-value state at a store revision
	// (etcd's HashKV), so that members can be compared: Value the le64
	// revision (0: the latest), Key and Flags empty; served by whichever
	// node is asked, leader or not. Response: Value a HashKV (hashkv.go);
	// a compacted revision is StatusCompacted, a future one
	// StatusFutureRevision.
	OpHashKV Op = 25
	// OpMemberAddVoter adds a member that votes at once (etcd's MemberAdd
	// without --learner), as OpMemberAdd takes it: Key its decimal id,
	// Value its address. A server that predates it refuses the op (the
	// connection closes), where a flag on OpMemberAdd, which older
	// servers do not check, would have added a learner unasked.
	OpMemberAddVoter Op = 26
	// OpMemberUpdate changes a member's peer address (etcd's
	// MemberUpdate): Key its decimal id, Value its new address.
	OpMemberUpdate Op = 27
	// OpPutBatch commits several independent PUTs in one request and one
	// Raft entry (batch.go), applied one after the other as if each were
	// a request of its own: each at its own revision, with its own
	// outcome. Value: the PUTs (internal/txn's batch encoding), Key and
	// Flags empty. Response: Value one result per PUT (BatchResults). A
	// server announces it in its Hello (FeaturePutBatch); one that
	// predates it closes the connection on it, so clients send it only to
	// servers that announce it.
	OpPutBatch Op = 28
	opMax         = OpPutBatch
)

func (o Op) String() string {
	switch o {
	case OpHello:
		return "hello"
	case OpGet:
		return "get"
	case OpPut:
		return "put"
	case OpDelete:
		return "delete"
	case OpStatus:
		return "status"
	case OpMemberList:
		return "member-list"
	case OpMemberAdd:
		return "member-add"
	case OpMemberRemove:
		return "member-remove"
	case OpMemberPromote:
		return "member-promote"
	case OpClock:
		return "clock"
	case OpTxn:
		return "txn"
	case OpScan:
		return "scan"
	case OpWatch:
		return "watch"
	case OpWatchCancel:
		return "watch-cancel"
	case OpSnapshot:
		return "snapshot"
	case OpGetMany:
		return "get-many"
	case OpLeaseGrant:
		return "lease-grant"
	case OpLeaseRevoke:
		return "lease-revoke"
	case OpLeaseKeepAlive:
		return "lease-keepalive"
	case OpLeaseTimeToLive:
		return "lease-ttl"
	case OpLeaseList:
		return "lease-list"
	case OpMoveLeader:
		return "move-leader"
	case OpCompact:
		return "compact"
	case OpDeleteRange:
		return "delete-range"
	case OpHashKV:
		return "hash-kv"
	case OpMemberAddVoter:
		return "member-add-voter"
	case OpMemberUpdate:
		return "member-update"
	case OpPutBatch:
		return "put-batch"
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Status is a response's outcome.
type Status uint16

// Statuses. internal/errs maps each onto one of kvd's sentinel errors
// (the server encodes with it, the client decodes).
const (
	StatusOK            Status = 0
	StatusNotFound      Status = 1
	StatusNotLeader     Status = 2 // Value: leader address (may be empty); Version: leader id
	StatusKeyTooLarge   Status = 3
	StatusValueTooLarge Status = 4
	StatusNoSpace       Status = 5
	StatusBadRequest    Status = 6 // Value: message
	StatusUnavailable   Status = 7 // Value: message; a write may or may not have been applied
	StatusInternal      Status = 8 // Value: message
	StatusEmptyKey      Status = 9
	StatusRetry         Status = 10 // Value: message; the request was not applied and may be retried
	// StatusPermissionDenied: the connection's credential may not make this
	// request (a read-only client certificate asking for a write); nothing
	// was applied. Value: message.
	StatusPermissionDenied Status = 11
	// StatusStorage: the node stopped on a storage failure (a full or
	// read-only disk, a failed fsync) and serves nothing more until it is
	// restarted; a write may or may not have been applied (its entry may
	// have reached other nodes). Value: the cause.
	StatusStorage Status = 12
	// StatusCompacted ends a watch whose history this node no longer
	// holds (or never held: it keeps a bounded history in memory, from its
	// start). Version: the oldest version it can serve a watch from;
	// Value: message.
	StatusCompacted Status = 13
	// StatusLeaseNotFound: the TTL lease named does not exist (never
	// granted, revoked or expired); nothing was applied. (13 is the
	// watch's.)
	StatusLeaseNotFound Status = 14
	// StatusFutureRevision: a read at a revision, or a compaction to one,
	// named a revision the store has not reached. Value: message.
	StatusFutureRevision Status = 15
	// StatusLeaseExists: a lease grant named an id another lease has;
	// nothing was applied. Value: message. Only a grant naming its id
	// gets it, which clients that predate it cannot send.
	StatusLeaseExists Status = 16
)

// Errors returned by the decoders.
var (
	ErrShort   = errors.New("wire: frame too short")
	ErrVersion = errors.New("wire: unsupported frame version")
	ErrLength  = errors.New("wire: frame length does not match its header")
	ErrOp      = errors.New("wire: unknown op")
)

// Write flags. A PUT or a range delete with PrevKV answers with the
// previous keys (etcd's prev_kv) in its response's Value, as a
// ScanResponse with their metadata. A PUT with PutIgnoreValue (and no
// value) keeps the key's value, one with PutIgnoreLease keeps its lease
// (etcd's ignore_value, ignore_lease); the key must exist. A server
// before a flag refuses it as a bad request.
const (
	PutPrevKV      uint16 = 1
	PutIgnoreValue uint16 = 2
	PutIgnoreLease uint16 = 4
	DeletePrevKV   uint16 = 1
	putFlags              = PutPrevKV | PutIgnoreValue | PutIgnoreLease
)

// KnownPutFlags reports whether a PUT's flags are all ones this build knows.
func KnownPutFlags(f uint16) bool { return f&^putFlags == 0 }

// Request is a decoded request. Key and Value alias the frame they were
// decoded from.
type Request struct {
	Op    Op
	Flags uint16
	ID    uint64
	Key   []byte
	Value []byte
}

// Response is a decoded response. Value aliases the frame.
type Response struct {
	Op      Op
	Status  Status
	ID      uint64
	Version uint64
	Value   []byte
}

// AppendRequest appends r's encoding to b.
func AppendRequest(b []byte, r *Request) []byte {
	b = append(b, Version, byte(r.Op))
	b = binary.LittleEndian.AppendUint16(b, r.Flags)
	b = binary.LittleEndian.AppendUint64(b, r.ID)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(r.Key)))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(r.Value)))
	b = append(b, r.Key...)
	return append(b, r.Value...)
}

// decodeHead checks what requests and responses share: a minimum length, the
// version byte and a known op.
func decodeHead(b []byte, minLen int) (Op, error) {
	if len(b) < minLen {
		return 0, fmt.Errorf("%w: %d bytes", ErrShort, len(b))
	}
	if b[0] != Version {
		return 0, fmt.Errorf("%w: %d (want %d)", ErrVersion, b[0], Version)
	}
	op := Op(b[1])
	if op == 0 || op > opMax {
		return 0, fmt.Errorf("%w: %d", ErrOp, b[1])
	}
	return op, nil
}

// DecodeRequest parses a request frame. Key longer than 65535 bytes cannot be
// encoded; callers check limits before encoding.
func DecodeRequest(b []byte, r *Request) error {
	op, err := decodeHead(b, RequestHeaderLen)
	if err != nil {
		return err
	}
	kl := int(binary.LittleEndian.Uint16(b[12:]))
	vl := uint64(binary.LittleEndian.Uint32(b[14:]))
	if uint64(len(b)-RequestHeaderLen) != uint64(kl)+vl {
		return fmt.Errorf("%w: header says %d+%d, frame has %d", ErrLength, kl, vl, len(b)-RequestHeaderLen)
	}
	*r = Request{
		Op:    op,
		Flags: binary.LittleEndian.Uint16(b[2:]),
		ID:    binary.LittleEndian.Uint64(b[4:]),
		Key:   b[RequestHeaderLen : RequestHeaderLen+kl : RequestHeaderLen+kl],
		Value: b[RequestHeaderLen+kl:],
	}
	return nil
}

// AppendResponse appends r's encoding to b.
func AppendResponse(b []byte, r *Response) []byte {
	b = append(b, Version, byte(r.Op))
	b = binary.LittleEndian.AppendUint16(b, uint16(r.Status))
	b = binary.LittleEndian.AppendUint64(b, r.ID)
	b = binary.LittleEndian.AppendUint64(b, r.Version)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(r.Value)))
	return append(b, r.Value...)
}

// DecodeResponse parses a response frame.
func DecodeResponse(b []byte, r *Response) error {
	op, err := decodeHead(b, ResponseHeaderLen)
	if err != nil {
		return err
	}
	vl := uint64(binary.LittleEndian.Uint32(b[20:]))
	if uint64(len(b)-ResponseHeaderLen) != vl {
		return fmt.Errorf("%w: header says %d, frame has %d", ErrLength, vl, len(b)-ResponseHeaderLen)
	}
	*r = Response{
		Op:      op,
		Status:  Status(binary.LittleEndian.Uint16(b[2:])),
		ID:      binary.LittleEndian.Uint64(b[4:]),
		Version: binary.LittleEndian.Uint64(b[12:]),
		Value:   b[ResponseHeaderLen:],
	}
	return nil
}
