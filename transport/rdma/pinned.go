package rdma

// Pinned is the memory a Transport has registered with its device, so
// pinned in RAM (Transport.Pinned). The rdma transport's connections report
// their own share too: a transport.Conn from it has a method
// PinnedBytes() int64.
type Pinned struct {
	// Conns is how many connections hold registered memory (set up and not
	// yet torn down; dialled and accepted alike).
	Conns int64
	// ConnBytes is what they hold: buffers, and READ staging.
	ConnBytes int64
	// StagingBytes is the READ staging part of ConnBytes. Only connections
	// that have called Read have any (a server's accepted connections
	// never do).
	StagingBytes int64
	// RegionBytes is held by regions (Register), whole pages.
	RegionBytes int64
}

// connBufferBytes is what a connection registers when it is set up (before
// page rounding): receive buffers, send buffers and credit-message buffers.
func connBufferBytes(c Config) int64 {
	c = c.withDefaults()
	return int64(c.RecvBuffers+ctlBuffers+c.SendBuffers)*int64(c.BufSize) + ctlBuffers*64
}

// stagingBytes is what a connection registers on its first Read.
func stagingBytes(c Config) int64 {
	c = c.withDefaults()
	return int64(c.ReadSlots) * int64(c.ReadSlotSize)
}
