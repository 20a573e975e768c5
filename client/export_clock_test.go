package client

import "time"

// AgeClockSamples makes every node's clock sample look d older, as if the
// client had been idle that long. For tests and benchmarks.
func AgeClockSamples(c *Client, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.nodes {
		if s := n.clock.sample.Load(); s != nil {
			n.clock.sample.Store(&clockSample{mono: s.mono, sent: s.sent - mono(d)})
		}
	}
}
