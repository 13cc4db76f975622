//go:build !stoke_invariants

package gpu

// slotMisusePanics: in normal builds pinned returns errors on slot misuse.
const slotMisusePanics = false
