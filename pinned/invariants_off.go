//go:build !stoke_invariants

package pinned

// violation reports a broken slot invariant: an error in normal builds.
func violation(err error) error { return err }

// invariantsPanic tells tests that misuse slots on purpose that misuse panics in this build.
const invariantsPanic = false
