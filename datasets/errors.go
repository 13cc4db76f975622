package datasets

import "errors"

// Sentinel errors of Open that callers check with errors.Is; the errors about data wrap those of
// package loaders (loaders.ErrCorrupt, ErrLabel, ErrIndex, ErrEmpty).
var (
	// ErrSpec marks a dataset spec or split that Open does not understand.
	ErrSpec = errors.New("bad dataset spec")
	// ErrNoSplit marks a dataset that has no such split (a folder without val/, shards of another
	// split); its message names the splits the dataset has.
	ErrNoSplit = errors.New("no such split")
)
