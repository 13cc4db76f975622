package dist

import "errors"

// The sentinels callers check with errors.Is.
var (
	// ErrMismatch: the ranks disagree (Agree's value, or the collective each
	// rank called, its size, dtype, op or root).
	ErrMismatch = errors.New("dist: mismatch")
	// ErrTimeout: an operation ran past Config.Timeout.
	ErrTimeout = errors.New("dist: timed out")
	// ErrPeer: a peer died, closed its connection, or sent bytes that are not
	// the protocol.
	ErrPeer = errors.New("dist: peer failed")
	// ErrClosed: the Group was closed.
	ErrClosed = errors.New("dist: group closed")
)
