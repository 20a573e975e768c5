package wal

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// model is what the log should hold: the reference the tests compare a
// reopened log with.
type model struct {
	hs    *pb.HardState
	trunc indexTerm
	ents  []*pb.Entry
}

func newModel() model { return model{hs: &pb.HardState{}} }

func (m model) last() uint64 { return m.trunc.index + uint64(len(m.ents)) }

func (m model) clone() model {
	return model{hs: proto.Clone(m.hs).(*pb.HardState), trunc: m.trunc, ents: append([]*pb.Entry(nil), m.ents...)}
}

func (m *model) append(ents []*pb.Entry) {
	for _, e := range ents {
		m.ents = append(m.ents[:e.GetIndex()-m.trunc.index-1], e)
	}
}

func (m *model) compact(index uint64) {
	if index <= m.trunc.index {
		return
	}
	term := m.ents[index-m.trunc.index-1].GetTerm()
	m.ents = append([]*pb.Entry(nil), m.ents[index-m.trunc.index:]...)
	m.trunc = indexTerm{index, term}
}

func (m *model) reset(index, term uint64) {
	m.ents, m.trunc = nil, indexTerm{index, term}
}

func fromRecovered(r *Recovered) model {
	return model{hs: r.HardState, trunc: indexTerm{r.Index, r.Term}, ents: r.Entries}
}

// diff describes how got differs from want ("" if equal).
func (m model) diff(got model) string {
	if !proto.Equal(m.hs, got.hs) {
		return fmt.Sprintf("HardState %v, want %v", got.hs, m.hs)
	}
	if m.trunc != got.trunc {
		return fmt.Sprintf("truncation point %v, want %v", got.trunc, m.trunc)
	}
	if len(m.ents) != len(got.ents) {
		return fmt.Sprintf("%d entries, want %d (last %d, want %d)", len(got.ents), len(m.ents), got.last(), m.last())
	}
	for i := range m.ents {
		if !proto.Equal(m.ents[i], got.ents[i]) {
			return fmt.Sprintf("entry %d: %v, want %v", m.ents[i].GetIndex(), got.ents[i], m.ents[i])
		}
	}
	return ""
}

// checkLog checks that the open log l serves exactly m.
func checkLog(t *testing.T, l *Log, m model) {
	t.Helper()
	if got, want := l.FirstIndex(), m.trunc.index+1; got != want {
		t.Fatalf("FirstIndex %d, want %d", got, want)
	}
	if got, want := l.LastIndex(), m.last(); got != want {
		t.Fatalf("LastIndex %d, want %d", got, want)
	}
	if term, err := l.Term(m.trunc.index); err != nil || term != m.trunc.term {
		t.Fatalf("Term(%d) = %d, %v; want %d", m.trunc.index, term, err, m.trunc.term)
	}
	if len(m.ents) == 0 {
		return
	}
	got, err := l.Entries(m.trunc.index+1, m.last()+1, 1<<62)
	if err != nil {
		t.Fatalf("Entries: %v", err)
	}
	if d := m.diff(model{hs: l.HardState(), trunc: m.trunc, ents: got}); d != "" {
		t.Fatalf("log serves %s", d)
	}
}

func ents(first, term uint64, n int, fill byte) []*pb.Entry {
	out := make([]*pb.Entry, n)
	for i := range out {
		out[i] = &pb.Entry{Index: proto.Uint64(first + uint64(i)), Term: proto.Uint64(term), Data: bytes.Repeat([]byte{fill + byte(i)}, 100)}
	}
	return out
}

func randEntries(rng *rand.Rand, first, term uint64, n, maxData int) []*pb.Entry {
	out := make([]*pb.Entry, n)
	for i := range out {
		data := make([]byte, rng.IntN(maxData+1))
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		out[i] = &pb.Entry{Index: proto.Uint64(first + uint64(i)), Term: proto.Uint64(term), Type: pb.EntryType_EntryNormal.Enum(), Data: data}
	}
	return out
}

func memConfig(fs vfs.FS, segSize int64) Config {
	return Config{Dir: "/wal", FS: fs, SegmentSize: segSize}
}

func mustOpen(t *testing.T, cfg Config) (*Log, *Recovered) {
	t.Helper()
	l, r, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return l, r
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
