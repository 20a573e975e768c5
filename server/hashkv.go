package server

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"sync"
	"time"

	"github.com/kvd-project/kvd/internal/revision"
	"github.com/kvd-project/kvd/internal/wire"
)

// MaxHashKV bounds the OpHashKV requests one node serves at once: each
// reads the whole state. One beyond it is refused at once with
// StatusRetry and logged (rate-limited); the request metrics count it by
// status.
const MaxHashKV = 1

const reasonHashBusy = "hashkv_busy" // the refusal log's key

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// hashSlots is the node's semaphore of concurrent OpHashKV requests.
type hashSlots struct {
	once sync.Once
	ch   chan struct{}
}

func (s *hashSlots) tryAcquire() bool {
	s.once.Do(func() { s.ch = make(chan struct{}, MaxHashKV) })
	select {
	case s.ch <- struct{}{}:
		return true
	default:
		return false
	}
}

func (s *hashSlots) release() { <-s.ch }

// hashKV serves OpHashKV from this node's own store (no ReadIndex: the
// point is to compare members' states): a CRC-32C of each key live at the
// revision, in key order, as keyLen:u32 key valueLen:u32 value
// create:u64 mod:u64 version:u64 lease:u64. Members that applied the
// same entries hash alike at the same revision.
func (s *Server) hashKV(_ context.Context, req *wire.Request) wire.Response {
	if len(req.Key) != 0 || len(req.Value) != 8 || req.Flags != 0 {
		return badRequest("hash-kv takes an 8-byte revision and nothing else")
	}
	if !s.hashSlots.tryAcquire() {
		if ok, held := s.refusalLog.Allow(reasonHashBusy, time.Now()); ok {
			s.log.Warn("hash-kv refused: one is already running", "max", MaxHashKV, "similar_not_logged", held)
		}
		return wire.Response{Status: wire.StatusRetry, Value: fmt.Appendf(nil, "this node already hashes %d time(s), its limit; try again later", MaxHashKV)}
	}
	defer s.hashSlots.release()
	compacted := s.kv.CompactRevision()
	h := crc32.New(castagnoli)
	var buf []byte
	rev, err := s.kv.RangeAt(nil, nil, binary.LittleEndian.Uint64(req.Value), func(key, value []byte, m revision.Meta) bool {
		buf = binary.LittleEndian.AppendUint32(buf[:0], uint32(len(key)))
		buf = append(buf, key...)
		buf = binary.LittleEndian.AppendUint32(buf, uint32(len(value)))
		h.Write(buf)
		h.Write(value)
		buf = binary.LittleEndian.AppendUint64(buf[:0], m.Create)
		buf = binary.LittleEndian.AppendUint64(buf, m.Mod)
		buf = binary.LittleEndian.AppendUint64(buf, m.Version)
		buf = binary.LittleEndian.AppendUint64(buf, m.Lease)
		h.Write(buf)
		return true
	})
	if err != nil {
		return s.errResponse(err)
	}
	return wire.Response{Value: wire.AppendHashKV(nil, wire.HashKV{Hash: h.Sum32(), CompactRevision: compacted, HashRevision: rev})}
}
