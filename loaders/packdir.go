package loaders

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// PackLockName is the lock file of a folder that a pack is writing. It exists from CreatePackDir
// until Commit: readers refuse a folder that holds it (the pack runs, failed or was killed).
const PackLockName = ".stoke-pack.lock"

// ErrPackDir marks an output folder that a pack may not write: another pack holds it, it holds
// files that are not a pack, or it holds a previous pack and overwriting was not asked for.
var ErrPackDir = errors.New("pack folder not usable")

// PackDir is an output folder held by one pack, exclusively, from CreatePackDir to Commit or Abort.
type PackDir struct {
	dir    string
	prefix string
	lock   *os.File
}

// CreatePackDir takes dir for a pack whose shards are named prefix + number + suffix (the file
// name of a ShardWriterConfig.Pattern up to its verb, such as "shard-"), creating it if missing.
// dir must be empty or hold a previous pack (its shards, index, lock file and temporary files):
// with overwrite that pack is removed completely first, otherwise it is an error. Any other file
// in dir is an error either way. A pack holding dir (through the lock file, locked with flock
// where the system has it) makes the call fail at once. Errors wrap ErrPackDir.
func CreatePackDir(dir, prefix string, overwrite bool) (*PackDir, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	lock, err := lockFile(filepath.Join(dir, PackLockName))
	if err != nil {
		return nil, fmt.Errorf("loaders: pack into %s: %w", dir, err)
	}
	p := &PackDir{dir: dir, prefix: prefix, lock: lock}
	entries, err := os.ReadDir(dir)
	if err != nil {
		p.release()
		return nil, err
	}
	var old []string
	for _, e := range entries {
		name := e.Name()
		switch {
		case name == PackLockName:
		case p.isPackFile(name) && e.Type().IsRegular():
			old = append(old, name)
		default:
			p.release()
			return nil, fmt.Errorf("loaders: pack into %s: it holds %s, which no pack wrote; use an empty or new folder: %w", dir, name, ErrPackDir)
		}
	}
	if len(old) > 0 && !overwrite {
		p.release()
		return nil, fmt.Errorf("loaders: pack into %s: it holds a previous pack (%d files such as %s); remove it or overwrite it (stoke pack --overwrite): %w", dir, len(old), old[0], ErrPackDir)
	}
	// The index goes first, so that the folder stops reading as a dataset at once (the lock file
	// also says so until Commit).
	slices.SortFunc(old, func(a, b string) int {
		return boolInt(b == IndexName) - boolInt(a == IndexName)
	})
	for _, name := range old {
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			p.release()
			return nil, fmt.Errorf("loaders: pack into %s: removing the previous pack: %w", dir, err)
		}
	}
	return p, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// isPackFile reports whether name is something a pack into the folder writes: the index, shards
// named prefix + digits + a shard suffix, and the temporary files of both.
func (p *PackDir) isPackFile(name string) bool {
	name, hidden := strings.CutPrefix(name, ".")
	if hidden {
		i := strings.LastIndex(name, ".tmp")
		if i < 0 {
			return false
		}
		name = name[:i]
	}
	if name == IndexName {
		return true
	}
	rest, ok := strings.CutPrefix(name, p.prefix)
	if !ok {
		return false
	}
	digits := len(rest) - len(strings.TrimLeft(rest, "0123456789"))
	if digits == 0 {
		return false
	}
	_, err := shardCompression(rest[digits:])
	return err == nil && !strings.ContainsAny(rest[digits:], "%/")
}

// Commit ends the pack: the folder reads as a dataset from now on. Call it after the ShardWriter's
// Close succeeded.
func (p *PackDir) Commit() error {
	err := os.Remove(filepath.Join(p.dir, PackLockName))
	if d, derr := os.Open(p.dir); derr == nil {
		d.Sync() // make the renames and the removal durable where the system can
		d.Close()
	}
	return errors.Join(err, p.lock.Close())
}

// Abort gives the folder up after a failed pack (whose ShardWriter was aborted): the lock file is
// removed, so that the folder holds what it held before, minus the previous pack if it was
// overwritten.
func (p *PackDir) Abort() error {
	return p.release()
}

func (p *PackDir) release() error {
	return errors.Join(os.Remove(filepath.Join(p.dir, PackLockName)), p.lock.Close())
}
