package rdma

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/kvd-project/kvd/internal/errs"
	"github.com/kvd-project/kvd/transport"
)

// PollMode says how completions are reaped.
type PollMode int

const (
	// PollEvents sleeps on the completion channel between bursts of
	// completions: no CPU while idle. A wake-up through the channel costs a
	// few microseconds and a hand-off between goroutines, so before sleeping
	// the transport briefly polls instead (Config.SpinPoll): a goroutine
	// waiting for its Read or its next message polls the completion queue
	// itself, and the reaper goroutine keeps polling for a while after a
	// burst. The default.
	PollEvents PollMode = iota
	// PollBusy spins on the completion queues in a goroutine: lowest latency,
	// but it keeps one core busy for the life of the Transport.
	PollBusy
)

func (m PollMode) String() string {
	switch m {
	case PollEvents:
		return "events"
	case PollBusy:
		return "busy"
	}
	return fmt.Sprintf("PollMode(%d)", int(m))
}

// Defaults of Config fields.
const (
	// DefaultSpinPoll is the default Config.SpinPoll.
	DefaultSpinPoll = 50 * time.Microsecond
	// DefaultAckTimeout is the default Config.AckTimeout: 4.096µs·2^14.
	DefaultAckTimeout = 4096 * time.Nanosecond << defaultAckExp
	// DefaultRetryCount is the default Config.RetryCount.
	DefaultRetryCount = 6
	// DefaultKeepAlive is the default Config.KeepAlive.
	DefaultKeepAlive = 500 * time.Millisecond
	// DefaultMaxInline is the default Config.MaxInline.
	DefaultMaxInline = 256
	// DefaultSignalEvery is the default Config.SignalEvery.
	DefaultSignalEvery = 16
)

// Config configures a Transport. The zero value is valid: every zero field
// takes the documented default.
type Config struct {
	// Device is the RDMA device to use ("rxe0", "mlx5_0"). Default: the first
	// device librdmacm reports. Addresses given to Listen and Dial must
	// resolve to it.
	Device string

	// LocalAddr is the source IP Dial binds to. Default: none (the kernel
	// picks by route). Note that RoCE cannot use loopback addresses (127/8,
	// ::1): listen and dial on an address of the RDMA netdev.
	LocalAddr string

	// Poll selects busy polling or the completion channel. Default PollEvents.
	Poll PollMode

	// SpinPoll bounds adaptive polling in PollEvents mode (PollBusy ignores
	// it). A Read that has posted its READs, or a Recv that finds no
	// message queued, polls the completion queues itself for up to SpinPoll
	// before it sleeps, so a completion that arrives in that window reaches
	// it without a wake-up through the completion channel and without
	// crossing goroutines; and after a wake-up that reaped completions the
	// reaper goroutine keeps polling until SpinPoll passes without one. Each
	// poll is one cgo crossing that reaps a whole burst, and the spinning
	// goroutine yields (runtime.Gosched) between polls.
	//
	// The trade-off is CPU for latency. An idle transport still uses no CPU
	// (every spin ends SpinPoll after the last completion), but a wait the
	// window does not cover (a Recv for a message that comes later, a Read
	// slower than the window) burns SpinPoll of CPU before it sleeps, and
	// while completions keep arriving less than SpinPoll apart the reaper
	// polls continuously. A covered wait costs less CPU than a wake-up
	// would. Spinning yields to other goroutines, not to other processes: on
	// a machine with fewer cores than busy processes it can delay the
	// process that would produce the completion, so keep the window to a few
	// round trips (a few microseconds each on hardware, tens under Soft-RoCE
	// in the test VM).
	// Zero means DefaultSpinPoll; negative disables spinning (every wait
	// sleeps on the completion channel). At most 10ms.
	SpinPoll time.Duration

	// MaxMessage is the largest message Send accepts. A connection uses the
	// smaller of both ends' values. Default transport.DefaultMaxMessage.
	MaxMessage int

	// Credits is how many delivered messages a receiver queues before the
	// sender must wait. Default transport.DefaultCredits.
	Credits int

	// BufSize is the size of one send or receive buffer, so of one fragment
	// on the wire including a 16-byte header. Larger messages are split.
	// Default 8 KiB: with the other defaults a connection then registers
	// less than 1 MiB (package doc, "Memory").
	BufSize int

	// RecvBuffers is how many receive buffers each connection keeps posted
	// for data. Small queued messages hold their buffer until Recv, so it
	// should exceed Credits. Default Credits + Credits/4.
	RecvBuffers int

	// SendBuffers is how many registered send buffers each connection has,
	// so how many fragments may be in flight. Default 32.
	SendBuffers int

	// ReadSlots is how many Read calls one connection serves at once; more
	// wait. Default 8.
	ReadSlots int

	// ReadSlotSize is the registered staging memory per read slot. A batch
	// larger than this is done in several rounds. Default 256 KiB.
	ReadSlotSize int

	// Backlog is how many accepted connections a Listener queues before
	// Accept; further connection requests are rejected. Default 128.
	Backlog int

	// ResolveTimeout bounds address and route resolution when Dial's
	// context has no earlier deadline. Default 5s.
	ResolveTimeout time.Duration

	// TOS is the type of service of the connections' packets: on RoCEv2
	// the IP header's DS field (DSCP<<2, for lossless traffic classes), on
	// InfiniBand the GRH traffic class. It is rdma_cm's RDMA_OPTION_ID_TOS,
	// set on every dialled id before its route is resolved (the route
	// carries it to the queue pair) and on listening ids. Default 0 (best
	// effort). At most 255.
	TOS int

	// AckTimeout is the queue pairs' local ACK timeout: how long a work
	// request waits for the peer's acknowledgement before it is sent again
	// (rdma_cm's RDMA_OPTION_ID_ACK_TIMEOUT). The wire carries an exponent
	// n, the timeout being 4.096µs·2^n, so AckTimeout is rounded up to the
	// next such value. Together with RetryCount it bounds how long a dead
	// peer goes unnoticed (package doc, "Dead peers"). Zero means
	// DefaultAckTimeout (n=14, 67.1ms); negative leaves the connection
	// manager's value (on RoCE n=17 or more: 0.54s and up, so several
	// seconds to notice a dead host). At most 4.096µs·2^31.
	AckTimeout time.Duration

	// RetryCount is how many times a work request is sent again after an
	// ACK timeout before the connection fails. Zero means DefaultRetryCount
	// (6). At most 7, but Soft-RoCE (rxe) takes 7 to mean "retry for
	// ever", so there a dead peer would never be noticed.
	RetryCount int

	// KeepAlive is how long a connection may see no completion before it
	// posts a zero-length RDMA READ (answered by the peer's device, costing
	// its CPU nothing), so that an idle connection to a dead host fails
	// within the same bound as a busy one, plus KeepAlive. Zero means
	// DefaultKeepAlive (500ms); negative turns it off (an idle connection
	// then notices a dead host only when it next posts work).
	KeepAlive time.Duration

	// MaxInline is how many bytes of a SEND (header included) the queue
	// pairs ask to carry inline: the CPU copies them into the work request,
	// so the device need not fetch them from memory, which saves a DMA
	// round trip on small messages. The device may grant less (then as much
	// as it grants) or more (then all of that is used). Zero means
	// DefaultMaxInline (256); negative asks for none. At most 4096.
	MaxInline int

	// SignalEvery is how often a SEND asks for a completion while SENDs
	// overlap: one in every SignalEvery (at most half of SendBuffers, and
	// of the credit-message buffers), and any SEND posted while no
	// signalled one is outstanding (so one message at a time is signalled
	// every time). The others are retired when a later signalled work
	// request completes, and only then is their buffer reused. Fewer
	// completions mean less work for the completion goroutine. Zero means
	// DefaultSignalEvery (16); 1 signals every SEND.
	SignalEvery int

	// Auth, if set, authenticates every connection with shared keys before
	// either end may read the other's regions, and before Accept returns it
	// (see Auth). Both ends must have it: a dialer without it cannot
	// connect to a listener with it, nor the reverse. Default: none (any
	// peer that can reach the listener connects).
	Auth *Auth
}

// Limits that follow from the wire format and work-request ids.
const (
	headerSize    = 16
	minBufSize    = 256
	maxBufSize    = 1 << 24
	maxBuffers    = 4096 // 12-bit buffer index in work-request ids
	maxCredits    = 0xffff
	maxMaxMessage = 1 << 30
	maxReadSlots  = 256
	ctlBuffers    = 8 // receive buffers reserved for credit-only messages
	maxSpinPoll   = 10 * time.Millisecond
	maxTOS        = 255
	defaultAckExp = 14
	maxAckExp     = 31 // the wire's 5 bits; 0 would mean "wait forever"
	maxRetryCount = 7  // the wire's 3 bits
	maxInline     = 4096
)

// Sentinel errors of this package (besides those of package transport).
var (
	// ErrConfig reports an invalid Config.
	ErrConfig = errs.ErrConfig
	// ErrNoDevice: no RDMA device, or not the configured one, is present. It
	// wraps transport.ErrUnsupported.
	ErrNoDevice = fmt.Errorf("rdma: no RDMA device: %w", transport.ErrUnsupported)
	// ErrWrongDevice: an address resolves to an RDMA device other than the
	// transport's.
	ErrWrongDevice = errors.New("rdma: address is not on the transport's device")
)

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	if c.MaxMessage == 0 {
		c.MaxMessage = transport.DefaultMaxMessage
	}
	if c.Credits == 0 {
		c.Credits = transport.DefaultCredits
	}
	if c.BufSize == 0 {
		c.BufSize = 8 << 10
	}
	if c.RecvBuffers == 0 {
		c.RecvBuffers = c.Credits + c.Credits/4
	}
	if c.SendBuffers == 0 {
		c.SendBuffers = 32
	}
	if c.ReadSlots == 0 {
		c.ReadSlots = 8
	}
	if c.ReadSlotSize == 0 {
		c.ReadSlotSize = 256 << 10
	}
	if c.Backlog == 0 {
		c.Backlog = 128
	}
	if c.ResolveTimeout == 0 {
		c.ResolveTimeout = 5 * time.Second
	}
	if c.SpinPoll == 0 {
		c.SpinPoll = DefaultSpinPoll
	}
	if c.AckTimeout == 0 {
		c.AckTimeout = DefaultAckTimeout
	}
	if c.RetryCount == 0 {
		c.RetryCount = DefaultRetryCount
	}
	if c.KeepAlive == 0 {
		c.KeepAlive = DefaultKeepAlive
	}
	if c.MaxInline == 0 {
		c.MaxInline = DefaultMaxInline
	}
	if c.SignalEvery == 0 {
		c.SignalEvery = DefaultSignalEvery
	}
	return c
}

// idTOS and idAckExp are the values for cmID.setOptions (-1, 0: leave the
// connection manager's).
func (c Config) idTOS() int {
	if c.TOS == 0 {
		return -1
	}
	return c.TOS
}

func (c Config) idAckExp() int {
	if c.AckTimeout < 0 {
		return 0
	}
	return ackTimeoutExp(c.AckTimeout)
}

// Validate reports whether c is usable. Zero fields are checked as their
// defaults; c itself is not changed.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Poll != PollEvents && c.Poll != PollBusy:
		return fmt.Errorf("%w: unknown poll mode %d", ErrConfig, int(c.Poll))
	case c.MaxMessage < 0 || c.MaxMessage > maxMaxMessage:
		return fmt.Errorf("%w: MaxMessage %d not in [0, 1 GiB]", ErrConfig, c.MaxMessage)
	case c.Credits < 1 || c.Credits > maxCredits:
		return fmt.Errorf("%w: Credits %d not in [1, %d]", ErrConfig, c.Credits, maxCredits)
	case c.BufSize < minBufSize || c.BufSize > maxBufSize:
		return fmt.Errorf("%w: BufSize %d not in [%d, 16 MiB]", ErrConfig, c.BufSize, minBufSize)
	case c.RecvBuffers < 1 || c.RecvBuffers+ctlBuffers > maxBuffers:
		return fmt.Errorf("%w: RecvBuffers %d not in [1, %d]", ErrConfig, c.RecvBuffers, maxBuffers-ctlBuffers)
	case c.SendBuffers < 1 || c.SendBuffers+ctlBuffers > maxBuffers:
		return fmt.Errorf("%w: SendBuffers %d not in [1, %d]", ErrConfig, c.SendBuffers, maxBuffers-ctlBuffers)
	case c.ReadSlots < 1 || c.ReadSlots > maxReadSlots:
		return fmt.Errorf("%w: ReadSlots %d not in [1, %d]", ErrConfig, c.ReadSlots, maxReadSlots)
	case c.ReadSlotSize < 64 || c.ReadSlotSize > 1<<30:
		return fmt.Errorf("%w: ReadSlotSize %d not in [64, 1 GiB]", ErrConfig, c.ReadSlotSize)
	case c.Backlog < 1:
		return fmt.Errorf("%w: Backlog %d < 1", ErrConfig, c.Backlog)
	case c.LocalAddr != "" && net.ParseIP(c.LocalAddr) == nil:
		return fmt.Errorf("%w: LocalAddr %q is not an IP address", ErrConfig, c.LocalAddr)
	case c.ResolveTimeout < 0:
		return fmt.Errorf("%w: negative ResolveTimeout", ErrConfig)
	case c.SpinPoll > maxSpinPoll:
		return fmt.Errorf("%w: SpinPoll %v above %v (use PollBusy)", ErrConfig, c.SpinPoll, maxSpinPoll)
	case c.TOS < 0 || c.TOS > maxTOS:
		return fmt.Errorf("%w: TOS %d not in [0, %d]", ErrConfig, c.TOS, maxTOS)
	case c.AckTimeout > ackTimeoutOf(maxAckExp):
		return fmt.Errorf("%w: AckTimeout %v above %v", ErrConfig, c.AckTimeout, ackTimeoutOf(maxAckExp))
	case c.RetryCount < 0 || c.RetryCount > maxRetryCount:
		return fmt.Errorf("%w: RetryCount %d not in [0, %d]", ErrConfig, c.RetryCount, maxRetryCount)
	case c.MaxInline > maxInline:
		return fmt.Errorf("%w: MaxInline %d above %d", ErrConfig, c.MaxInline, maxInline)
	case c.SignalEvery < 1:
		return fmt.Errorf("%w: SignalEvery %d < 1", ErrConfig, c.SignalEvery)
	}
	if c.Auth != nil {
		if _, err := c.Auth.load(); err != nil {
			return err
		}
	}
	return nil
}
