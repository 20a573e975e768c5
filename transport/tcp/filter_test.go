package tcp

import (
	"errors"
	"sync"
	"testing"

	"github.com/kvd-project/kvd/transport"
)

// partition is a test's table of cut links, shared by every transport's
// Filter.
type partition struct{ cut sync.Map }

func (p *partition) filter(local, remote string) bool {
	_, ok := p.cut.Load(local + "|" + remote)
	return ok
}

func TestFilterPartitionAndHeal(t *testing.T) {
	// Cutting one direction of the table (a's view of b) is a full
	// partition; so is cutting b's view of a; SetFilter swaps the filter.
	tests := []struct {
		name string
		cut  func(p *partition, a, b *Transport)
		heal func(p *partition, a, b *Transport)
	}{
		{"cut on the listening end",
			func(p *partition, _, _ *Transport) { p.cut.Store("a|b", true) },
			func(p *partition, _, _ *Transport) { p.cut.Delete("a|b") }},
		{"cut on the dialing end",
			func(p *partition, _, _ *Transport) { p.cut.Store("b|a", true) },
			func(p *partition, _, _ *Transport) { p.cut.Delete("b|a") }},
		{"SetFilter",
			func(_ *partition, a, _ *Transport) { a.SetFilter(func(string, string) bool { return true }) },
			func(_ *partition, a, _ *Transport) { a.SetFilter(nil) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p partition
			const credits = 4
			a := newTestTransport(t, Config{Node: "a", Filter: p.filter, Credits: credits})
			b := newTestTransport(t, Config{Node: "b", Filter: p.filter, Credits: credits})
			ctx := testCtx(t)
			ln, err := a.Listen("127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			bc, err := b.Dial(ctx, ln.Addr())
			if err != nil {
				t.Fatal(err)
			}
			ac, err := ln.Accept(ctx)
			if err != nil {
				t.Fatal(err)
			}
			ra, _ := a.Register(64)
			rb, _ := b.Register(64)
			readA := []transport.ReadOp{{Remote: ra.Descriptor(), Dst: make([]byte, 8)}}
			readB := []transport.ReadOp{{Remote: rb.Descriptor(), Dst: make([]byte, 8)}}

			tt.cut(&p, a, b)
			// More messages than the window: dropped ones must not eat credits.
			for i := range 2 * credits {
				if err := bc.Send(ctx, []byte("lost b->a")); err != nil {
					t.Fatalf("Send %d b->a while cut: %v", i, err)
				}
				if err := ac.Send(ctx, []byte("lost a->b")); err != nil {
					t.Fatalf("Send %d a->b while cut: %v", i, err)
				}
			}
			if err := bc.Read(ctx, readA); !errors.Is(err, ErrPartitioned) {
				t.Errorf("b reads a while cut: %v, want ErrPartitioned", err)
			}
			if err := ac.Read(ctx, readB); !errors.Is(err, ErrPartitioned) {
				t.Errorf("a reads b while cut: %v, want ErrPartitioned", err)
			}

			tt.heal(&p, a, b)
			for _, dir := range []struct {
				from, to transport.Conn
				read     []transport.ReadOp
			}{{bc, ac, readA}, {ac, bc, readB}} {
				// The first message through is the first one sent after
				// healing; a whole window of them fits.
				for range credits {
					if err := dir.from.Send(ctx, []byte("healed")); err != nil {
						t.Fatal(err)
					}
				}
				for range credits {
					got, err := dir.to.Recv(ctx, nil)
					if err != nil || string(got) != "healed" {
						t.Fatalf("after healing, Recv = %q, %v; want \"healed\"", got, err)
					}
				}
				if err := dir.from.Read(ctx, dir.read); err != nil {
					t.Fatalf("Read after healing: %v", err)
				}
			}
		})
	}
}
