//go:build stoke_invariants

package gpu

// slotMisusePanics: built with stoke_invariants, pinned panics on slot misuse.
const slotMisusePanics = true
