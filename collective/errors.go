package collective

import (
	"errors"
	"fmt"
)

// The sentinels callers check with errors.Is.
var (
	// ErrMismatch: the ranks disagree (Agree's value, or the collective each
	// rank called, its size, dtype, op or root).
	ErrMismatch = errors.New("mismatch")
	// ErrTimeout: an operation ran past Config.Timeout.
	ErrTimeout = errors.New("timed out")
	// ErrPeer: a peer died, closed its connection, or sent bytes that are not
	// the protocol.
	ErrPeer = errors.New("peer failed")
	// ErrClosed: the Group was closed.
	ErrClosed = errors.New("group closed")
)

// kindError is an error whose message is its own and which also matches a
// sentinel (errors.Is), so messages read "collective: barrier: timed out after 5s
// waiting for rank 1" rather than repeat the sentinel's text.
type kindError struct {
	kind, err error
}

func (e *kindError) Error() string   { return e.err.Error() }
func (e *kindError) Unwrap() []error { return []error{e.kind, e.err} }

// errf formats an error that wraps kind (nil: none) and what format wraps.
func errf(kind error, format string, a ...any) error {
	err := fmt.Errorf(format, a...)
	if kind == nil {
		return err
	}
	return &kindError{kind: kind, err: err}
}
