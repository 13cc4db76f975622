// Package packdir is the pack folder protocol of stoke pack: an output folder held by one pack,
// exclusively (a lock file, flock'd where the system has it), cleared of a previous pack only when
// asked, and released by Commit (the folder then reads as a dataset) or Abort. The dataset readers
// refuse a folder that holds LockName. It is internal because only the command line packs; the
// library's part is datasets.ShardWriter.
//
// # Concurrency
//
// A Dir is used by one goroutine. Two processes (or goroutines) creating a Dir over one folder:
// one wins, the other gets an error wrapping ErrUnusable at once.
//
// # Ownership
//
// The Dir holds the lock file from Create until Commit or Abort, which remove it.
package packdir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// LockName is the lock file of a folder that a pack is writing. It exists from Create until
// Commit: readers refuse a folder that holds it (the pack runs, failed or was killed).
const LockName = ".stoke-pack.lock"

// ErrUnusable marks an output folder that a pack may not write: another pack holds it, it holds
// files that are not a pack, or it holds a previous pack and overwriting was not asked for.
var ErrUnusable = errors.New("pack folder not usable")

// Options say what a pack writes into its folder, and whether a previous pack may go.
type Options struct {
	// Prefixes are the shards' file names up to their number (the file name of a
	// datasets.ShardWriterConfig.Pattern up to its integer verb, such as "shard-", or one per
	// split, "shard-train-", "shard-val-", ...).
	Prefixes []string
	// Index is the name of the pack's index (datasets.IndexName); overwriting removes it first,
	// so that the folder stops reading as a dataset at once.
	Index string
	// IsShard reports whether a file name's end (after the prefix and the number) is a shard's
	// suffix (datasets.IsShardName).
	IsShard func(name string) bool
	// Overwrite removes a previous pack in the folder; without it, one is an error.
	Overwrite bool
}

// Dir is an output folder held by one pack, exclusively, from Create to Commit or Abort.
type Dir struct {
	dir  string
	opts Options
	lock *os.File
}

// Create takes dir for a pack whose shards are named prefix + number + suffix, creating it if
// missing. dir must be empty or hold a previous pack (its shards, index, lock file and temporary
// files): with o.Overwrite that pack is removed completely first, otherwise it is an error. Any
// other file in dir is an error either way. A pack holding dir (through the lock file, locked with
// flock where the system has it) makes the call fail at once. Errors wrap ErrUnusable; a nil
// o.IsShard is an error.
func Create(dir string, o Options) (*Dir, error) {
	if o.IsShard == nil || o.Index == "" {
		return nil, fmt.Errorf("packdir: pack into %s: Options need IsShard and Index: %w", dir, ErrUnusable)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	lock, err := lockFile(filepath.Join(dir, LockName))
	if err != nil {
		return nil, fmt.Errorf("packdir: pack into %s: %w", dir, err)
	}
	p := &Dir{dir: dir, opts: o, lock: lock}
	entries, err := os.ReadDir(dir)
	if err != nil {
		p.release()
		return nil, err
	}
	var old []string
	for _, e := range entries {
		name := e.Name()
		switch {
		case name == LockName:
		case p.isPackFile(name) && e.Type().IsRegular():
			old = append(old, name)
		default:
			p.release()
			return nil, fmt.Errorf("packdir: pack into %s: it holds %s, which no pack wrote; use an empty or new folder: %w", dir, name, ErrUnusable)
		}
	}
	if len(old) > 0 && !o.Overwrite {
		p.release()
		return nil, fmt.Errorf("packdir: pack into %s: it holds a previous pack (%d files such as %s); remove it or overwrite it (stoke pack --overwrite): %w", dir,
			len(old), old[0], ErrUnusable)
	}
	// The index goes first, so that the folder stops reading as a dataset at once (the lock file
	// also says so until Commit).
	slices.SortFunc(old, func(a, b string) int {
		return boolInt(b == o.Index) - boolInt(a == o.Index)
	})
	for _, name := range old {
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			p.release()
			return nil, fmt.Errorf("packdir: pack into %s: removing the previous pack: %w", dir, err)
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
func (p *Dir) isPackFile(name string) bool {
	name, hidden := strings.CutPrefix(name, ".")
	if hidden {
		i := strings.LastIndex(name, ".tmp")
		if i < 0 {
			return false
		}
		name = name[:i]
	}
	if name == p.opts.Index {
		return true
	}
	return slices.ContainsFunc(p.opts.Prefixes, func(prefix string) bool {
		rest, ok := strings.CutPrefix(name, prefix)
		digits := len(rest) - len(strings.TrimLeft(rest, "0123456789"))
		return ok && digits > 0 && p.opts.IsShard(rest[digits:]) && !strings.ContainsAny(rest[digits:], "%/")
	})
}

// Commit ends the pack: the folder reads as a dataset from now on. Call it after the
// datasets.ShardWriter's Close succeeded.
func (p *Dir) Commit() error {
	err := os.Remove(filepath.Join(p.dir, LockName))
	if d, derr := os.Open(p.dir); derr == nil {
		d.Sync() // make the renames and the removal durable where the system can
		d.Close()
	}
	return errors.Join(err, p.lock.Close())
}

// Abort gives the folder up after a failed pack (whose ShardWriter was aborted): the lock file is
// removed, so that the folder holds what it held before, minus the previous pack if it was
// overwritten.
func (p *Dir) Abort() error {
	return p.release()
}

func (p *Dir) release() error {
	return errors.Join(os.Remove(filepath.Join(p.dir, LockName)), p.lock.Close())
}
