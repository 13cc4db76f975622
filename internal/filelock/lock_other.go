//go:build !unix

package filelock

import "context"

// Lock is a no-op where flock is missing: processes sharing a cache may then download the same
// copy at once (each to its own temporary file; the copies stay whole).
func Lock(context.Context, string) (func(), error) { return func() {}, nil }
