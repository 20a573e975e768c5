package transport

// Reasons a connection is refused, or closed for breaking a limit: the
// values of kvd_connections_refused_total's reason label. A transport that
// enforces limits reports its own through its listener's refusal hook
// (transport/tcp's Limits); the server adds those only it can see. Both
// count into the one metric, so the reasons are named here once.
const (
	// ReasonMaxConns: the listener already held its most connections.
	ReasonMaxConns = "max_connections"
	// ReasonHandshake: the dialer failed the handshake (TLS or hello) or
	// did not finish it in time.
	ReasonHandshake = "handshake"
	// ReasonIdle: nothing arrived for the idle timeout.
	ReasonIdle = "idle_timeout"
	// ReasonRead: a frame did not arrive whole within the read timeout.
	ReasonRead = "read_timeout"
	// ReasonWrite: the peer took no bytes for the write timeout.
	ReasonWrite = "write_timeout"
	// ReasonProtocol: the peer broke the wire protocol.
	ReasonProtocol = "protocol"
	// ReasonReadTooLarge: the peer posted a READ batch of more than
	// MaxReadBatchBytes (a protocol violation of its own kind).
	ReasonReadTooLarge = "read_batch_too_large"
	// ReasonSlowReader: the client did not take its replies, and they held
	// more than its connection may.
	ReasonSlowReader = "slow_reader"
	// ReasonMalformed: a request was not a request.
	ReasonMalformed = "malformed_request"
	// ReasonTooLarge: a reply or watch message was beyond what the
	// client's transport takes.
	ReasonTooLarge = "message_too_large"
	// ReasonWrongListener: a peer came to a node's client listener, or a
	// client to its peer listener (a node with a listener for each).
	ReasonWrongListener = "wrong_listener"
)

// RefusalReasons returns every Reason, for a metric to list them all.
func RefusalReasons() []string {
	return []string{
		ReasonMaxConns, ReasonHandshake, ReasonIdle, ReasonRead, ReasonWrite,
		ReasonProtocol, ReasonReadTooLarge, ReasonSlowReader, ReasonMalformed, ReasonTooLarge,
		ReasonWrongListener,
	}
}
