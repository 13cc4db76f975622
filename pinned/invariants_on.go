//go:build stoke_invariants

package pinned

// violation reports a broken slot invariant: with the stoke_invariants tag it panics, so that
// tests stop at the first misuse with its stack.
func violation(err error) error { panic(err) }

// invariantsPanic tells tests that misuse slots on purpose that misuse panics in this build.
const invariantsPanic = true
