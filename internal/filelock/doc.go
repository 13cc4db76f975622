// Package filelock is the lock that processes sharing a cache folder take around a download:
// flock where the system has it, released by the system when the holder exits, however it exits.
package filelock
