package wal

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// fixedSalt is a Knobs.SaltSource that makes every salt v, so that a test
// can forge a record with the salt of a segment not yet started.
type fixedSalt uint64

func (v fixedSalt) Read(b []byte) (int, error) {
	var w [8]byte
	binary.LittleEndian.PutUint64(w[:], uint64(v))
	for i := range b {
		b[i] = w[i%8]
	}
	return len(b), nil
}

// salt is the salt every segment gets from v.
func (v fixedSalt) salt() salt { return newSalt(uint64(v), uint64(v)) }

// forgery is a record a client crafts inside a value: everything it can
// predict is right (the segment's number, the record layout), and its
// checksums start from what it knows of the segment's salt. A segment
// header's checksum starts from no salt, so a forged one has a right
// checksum: only its offset keeps it out (and one salted with the true
// salt, which only a test can make, shows that the offset alone does).
type forgery struct {
	name  string
	typ   recType
	knows knowledge
}

// knowledge is what a forger knows of a segment's salt.
type knowledge int

const (
	guessesSalt     knowledge = iota // a guess (zero): what a client can do
	knowsFirstValue                  // the first checksum's seed: 2^32 guesses' luck
	knowsSalt                        // only a test can: it shows the record lies where replay reads
)

func (fg forgery) record(t *testing.T, seq, batch, index uint64, s salt) []byte {
	t.Helper()
	switch {
	case fg.typ == recSegment && fg.knows != knowsSalt:
		s = unsalted
	case fg.knows == guessesSalt:
		s = salt{keyed: true}
	case fg.knows == knowsFirstValue:
		s.seed2++
	}
	var payload []byte
	var err error
	switch fg.typ {
	case recEntry:
		payload, err = proto.Marshal(&pb.Entry{Index: proto.Uint64(index), Term: proto.Uint64(9), Data: []byte("forged")})
	case recHardState:
		payload, err = proto.Marshal(&pb.HardState{Term: proto.Uint64(9), Vote: proto.Uint64(9), Commit: proto.Uint64(index)})
	case recSegment:
		var hs []byte
		hs, err = proto.Marshal(&pb.HardState{Term: proto.Uint64(9), Vote: proto.Uint64(9), Commit: proto.Uint64(index)})
		payload = appendHeader(nil, indexTerm{index, 9}, seq-1, newSalt(42, 43), hs)
	default:
		t.Fatalf("no forgery of record type %d", fg.typ)
	}
	must(t, err)
	return appendRecord(nil, fg.typ, seq, batch, s, payload)
}

// forgedHigh is how many generations past the current one a forged
// record claims: enough that replay, if it read the record, would take
// the next generation from it or call the bytes before it damage.
const forgedHigh = 1000

// TestForgedRecordPastTornTailIsNotRead puts a record a client crafted
// (the segment's number, a generation far ahead) inside a value written
// right after a record that is then torn. Open scans every aligned offset
// past a torn tail for valid records, to tell damage from a torn write
// and to pick the next generation: the forged record must count in
// neither (no ErrCorrupt, no generation taken from it), and the log must
// replay what was written before the torn record.
func TestForgedRecordPastTornTailIsNotRead(t *testing.T) {
	cases := []struct {
		forgery
		wantRead bool
	}{
		{forgery{"entry, salt guessed", recEntry, guessesSalt}, false},
		{forgery{"HardState, salt guessed", recHardState, guessesSalt}, false},
		{forgery{"entry, first checksum right", recEntry, knowsFirstValue}, false},
		{forgery{"segment header", recSegment, guessesSalt}, false},
		{forgery{"segment header with the true salt", recSegment, knowsSalt}, false},
		{forgery{"entry with the true salt (only a test can make it)", recEntry, knowsSalt}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewMem()
			cfg := memConfig(fs, 64<<10)
			l, _ := mustOpen(t, cfg)
			want := newModel()
			want.append(ents(1, 1, 3, 'a'))
			must(t, l.Append(ents(1, 1, 3, 'a')))
			must(t, l.Sync())
			must(t, l.Append(ents(4, 1, 1, 'd'))) // torn below
			torn := l.ents[3]

			// Entry 5's value holds the forged record at an aligned offset.
			s := l.active()
			data := make([]byte, 256)
			e5 := &pb.Entry{Index: proto.Uint64(5), Term: proto.Uint64(1), Data: data}
			dataAt := s.size + hdrSize + int64(proto.Size(e5)-len(data))
			pad := int(-dataAt & (recordAlign - 1))
			copy(data[pad:], tc.record(t, s.seq, l.batch+forgedHigh, 5, s.salt))
			must(t, l.Append([]*pb.Entry{e5}))
			must(t, l.Sync())
			must(t, l.Close())
			patch(t, fs, s.seq, torn.off+hdrSize+10, []byte{0xff})

			l, r, err := Open(cfg)
			if tc.wantRead {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("Open with a record of a far generation past the tail: %v, want ErrCorrupt (the scan must reach the forged record)", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open: %v (the forged record counted as synced data)", err)
			}
			defer l.Close()
			if d := want.diff(fromRecovered(r)); d != "" {
				t.Fatalf("replay: %s", d)
			}
			if l.batch > forgedHigh {
				t.Fatalf("next generation %d: taken from the forged record", l.batch)
			}
			checkLog(t, l, want)
		})
	}
}

// TestForgedRecordInRecycledSpareIsNotRead puts a record a client crafted
// into a spare file, where its earlier use left a value, at the offset
// where the segment that recycles the spare will have its first record
// after the header. The record carries the number that segment will have
// (predictable: numbers only grow) and the current generation or one far
// ahead. The log is closed after the header is synced, so replay looks
// for a record exactly there: it must end the log there, adding no entry,
// no HardState and no generation.
func TestForgedRecordInRecycledSpareIsNotRead(t *testing.T) {
	cases := []struct {
		forgery
		ahead    uint64 // generations past the new segment's first
		wantRead bool
	}{
		{forgery{"entry, salt guessed", recEntry, guessesSalt}, 0, false},
		{forgery{"HardState of a far generation, salt guessed", recHardState, guessesSalt}, forgedHigh, false},
		{forgery{"entry, first checksum right", recEntry, knowsFirstValue}, 0, false},
		{forgery{"segment header", recSegment, guessesSalt}, 0, false},
		{forgery{"segment header with the true salt", recSegment, knowsSalt}, 0, false},
		{forgery{"entry with the true salt (only a test can make it)", recEntry, knowsSalt}, 0, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewMem()
			cfg := memConfig(fs, MinSegmentSize)
			const saltValue = 0x0123456789abcdef
			cfg.Knobs.SaltSource = fixedSalt(saltValue)
			l, _ := mustOpen(t, cfg)
			hs := &pb.HardState{Term: proto.Uint64(1), Commit: proto.Uint64(3)}
			must(t, l.SetHardState(hs))
			must(t, l.Append(ents(1, 1, 3, 'a')))
			must(t, l.Sync())
			want := newModel()
			want.hs = hs
			want.append(ents(1, 1, 3, 'a'))

			l.mu.Lock()
			l.collectSpare()
			if len(l.spares) == 0 {
				l.mu.Unlock()
				t.Fatal("test needs a spare to recycle")
			}
			spare, seq, batch := l.spares[0], l.nextSeq, l.batch
			b, err := proto.Marshal(l.hs)
			must(t, err)
			headerEnd := int64(recordSize(len(appendHeader(nil, l.trunc, l.active().seq, unsalted, b))))
			l.mu.Unlock()
			f, err := fs.OpenReadWrite(fs.PathJoin("/wal", spareName(spare)), vfs.WriteCategoryUnspecified)
			must(t, err)
			_, err = f.WriteAt(tc.record(t, seq, batch+1+tc.ahead, 4, fixedSalt(saltValue).salt()), headerEnd)
			must(t, err)
			must(t, f.Close())

			forceRoll(t, l)
			if got := l.active().seq; got != seq {
				t.Fatalf("new segment %d, want %d", got, seq)
			}
			must(t, l.Sync()) // the header
			must(t, l.Close())
			if _, err := fs.Stat(fs.PathJoin("/wal", segName(seq))); err != nil {
				t.Fatalf("the spare did not become segment %d: %v", seq, err)
			}

			l, r := mustOpen(t, cfg)
			defer l.Close()
			d := want.diff(fromRecovered(r))
			if tc.wantRead {
				if d == "" {
					t.Fatal("a record with the true salt was not read: the forged record does not lie where replay looks")
				}
				return
			}
			if d != "" {
				t.Fatalf("replay: %s", d)
			}
			if l.batch > forgedHigh {
				t.Fatalf("next generation %d: taken from the forged record", l.batch)
			}
			checkLog(t, l, want)
		})
	}
}
