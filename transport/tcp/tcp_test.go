package tcp

import (
	"testing"

	"github.com/kvd-project/kvd/transport"
	"github.com/kvd-project/kvd/transport/transporttest"
)

const testCredits = 8

func TestConformance(t *testing.T) {
	transporttest.Run(t, transporttest.Factory{
		New: func(t *testing.T) (server, client transport.Transport, addr string) {
			return newTestTransport(t, Config{Credits: testCredits}),
				newTestTransport(t, Config{Credits: testCredits}),
				"127.0.0.1:0"
		},
		Credits: testCredits,
	})
}

// newTestTransport returns a transport closed at the end of the test.
func newTestTransport(t testing.TB, cfg Config) *Transport {
	t.Helper()
	tr, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}
