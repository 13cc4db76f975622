package datasets

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/stoke-ml/stoke/loaders"
)

// Shard members are grouped into samples the way Python's WebDataset does it: the key of a member
// is its path up to the first dot of its base name, the extension the rest (lower-cased);
// consecutive members with the same key form one sample.
var (
	// imageMemberExts lists the members that hold an encoded image, in order of preference.
	imageMemberExts = []string{"jpg", "jpeg", "png", "webp", "gif", "bmp"}
	// labelMemberExts lists the members that hold a decimal class label, in order of preference.
	labelMemberExts = []string{"cls", "cls.txt", "label", "index"}
)

// A compressed shard may expand to at most maxExpansion times its file size (encoded images
// barely compress; raw pixels a few times), and never past maxCompressedShard (WebDataset shards
// are usually well under 1 GB), so that a compression bomb fails cleanly before it takes the disk;
// minCompressedLimit keeps tiny shards usable.
const (
	maxExpansion       = 100
	minCompressedLimit = 16 << 20
	maxCompressedShard = 64 << 30
)

// expansionLimit returns the most bytes a compressed shard of size bytes may expand to.
func expansionLimit(size int64) int64 {
	return min(max(maxExpansion*size, minCompressedLimit), maxCompressedShard)
}

// tarEOFMarker is the end-of-archive marker: two zero blocks. A tar without it was cut.
const tarEOFMarker = 1024

// maxSmallMember bounds the label and metadata members (.cls, .json) read into the shard index.
const maxSmallMember = 1 << 20

// splitMemberName splits a tar member name into WebDataset key and extension; ok is false for
// names without a dot in their base name and for WebDataset's "__...__" metadata members.
func splitMemberName(name string) (key, ext string, ok bool) {
	dir, base := "", name
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		dir, base = name[:i+1], name[i+1:]
	}
	dot := strings.IndexByte(base, '.')
	if dot <= 0 {
		return "", "", false
	}
	if dir == "" && strings.HasPrefix(base, "__") && strings.HasSuffix(base, "__") {
		return "", "", false
	}
	return dir + base[:dot], strings.ToLower(base[dot+1:]), true
}

// sampleMeta is what a shard scan learns about one sample: where its payload is, and its label.
type sampleMeta struct {
	key      string
	payload  string // extension of the image or raw member
	off, n   int64  // payload position in the (decompressed) shard
	shape    [3]int // H, W, C for a raw payload
	label    int
	labelErr error
}

// group accumulates the members of one key while a shard is read in order.
type group struct {
	key   string
	exts  []string
	offs  []int64
	sizes []int64
	small map[string][]byte
}

func (g *group) reset(key string) {
	g.key = key
	g.exts, g.offs, g.sizes = g.exts[:0], g.offs[:0], g.sizes[:0]
	clear(g.small)
}

// sampleMember returns the WebDataset key and extension of a tar member that belongs to a
// sample: a regular file with a key (see splitMemberName); ok is false for the others.
func sampleMember(h *tar.Header) (key, ext string, ok bool) {
	if h.Typeflag != tar.TypeReg {
		return "", "", false
	}
	return splitMemberName(h.Name)
}

// add records the group's member ext of n bytes at off; a second member with the same extension is
// an error.
func (g *group) add(ext string, off, n int64) error {
	if slices.Contains(g.exts, ext) {
		return fmt.Errorf("sample %q has two .%s members: %w", g.key, ext, loaders.ErrCorrupt)
	}
	g.exts = append(g.exts, ext)
	g.offs = append(g.offs, off)
	g.sizes = append(g.sizes, n)
	return nil
}

func (g *group) find(exts []string) int {
	for _, e := range exts {
		if i := slices.Index(g.exts, e); i >= 0 {
			return i
		}
	}
	return -1
}

// meta turns a finished group into the sample's description. Errors concerning the label are kept
// in labelErr so that they surface when the sample is read (and can be skipped); a group without
// any image payload is an error of the whole shard.
func (g *group) meta() (sampleMeta, error) {
	m := sampleMeta{key: g.key}
	if i := g.find(imageMemberExts); i >= 0 {
		m.payload, m.off, m.n = g.exts[i], g.offs[i], g.sizes[i]
	} else if i := g.find([]string{"raw"}); i >= 0 {
		m.payload, m.off, m.n = "raw", g.offs[i], g.sizes[i]
		shape, err := rawShape(g.small["json"])
		if err != nil {
			m.labelErr = err
		} else if int64(shape[0])*int64(shape[1])*int64(shape[2]) != m.n {
			m.labelErr = fmt.Errorf(".raw of %d bytes but shape %v: %w", m.n, shape, loaders.ErrCorrupt)
		}
		m.shape = shape
	} else {
		return m, fmt.Errorf("sample %q has no image member (members %v): %w", g.key, g.exts, loaders.ErrCorrupt)
	}
	if m.labelErr == nil {
		m.label, m.labelErr = g.label()
	}
	return m, nil
}

// label returns the group's label, at most math.MaxInt32 (class ids are int32 in a batch, and one
// more than the largest label counts the classes).
func (g *group) label() (int, error) {
	v, err := g.anyLabel()
	if err == nil && v > math.MaxInt32 {
		return 0, fmt.Errorf("label %d past the int32 class ids: %w", v, loaders.ErrLabel)
	}
	return v, err
}

func (g *group) anyLabel() (int, error) {
	for _, e := range labelMemberExts {
		if b, ok := g.small[e]; ok {
			v, err := strconv.Atoi(string(bytes.TrimSpace(b)))
			if err != nil {
				return 0, fmt.Errorf("label member .%s %q: %w", e, truncate(b, 20), loaders.ErrCorrupt)
			}
			return v, nil
		}
	}
	if b, ok := g.small["json"]; ok {
		var v struct{ Label *int }
		if err := json.Unmarshal(b, &v); err != nil {
			return 0, fmt.Errorf("member .json: %w: %w", loaders.ErrCorrupt, err)
		}
		if v.Label != nil {
			return *v.Label, nil
		}
	}
	return 0, fmt.Errorf("no label member (.cls, .label or .json with \"label\"): %w", loaders.ErrCorrupt)
}

func rawShape(js []byte) ([3]int, error) {
	var v struct{ Shape []int }
	if js == nil {
		return [3]int{}, fmt.Errorf(".raw without a .json giving its shape: %w", loaders.ErrCorrupt)
	}
	if err := json.Unmarshal(js, &v); err != nil {
		return [3]int{}, fmt.Errorf("member .json: %w: %w", loaders.ErrCorrupt, err)
	}
	if len(v.Shape) == 2 {
		v.Shape = append(v.Shape, 1)
	}
	if len(v.Shape) != 3 || v.Shape[0] <= 0 || v.Shape[1] <= 0 || v.Shape[2] <= 0 || v.Shape[2] > 4 ||
		int64(v.Shape[0])*int64(v.Shape[1]) > 1<<32 {
		return [3]int{}, fmt.Errorf(".json shape %v, want [H, W] or [H, W, C] with C in 1..4: %w", v.Shape, loaders.ErrCorrupt)
	}
	return [3]int{v.Shape[0], v.Shape[1], v.Shape[2]}, nil
}

func truncate(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

// scanTar reads a tar archive in order and calls emit for each complete sample. r must report its
// position through pos (the offset of the current member's data is pos() right after Next) and hold
// size bytes: a member reaching past them is truncated (skipping by seeking would not notice). Small
// members are read; the others are skipped.
func scanTar(r io.Reader, size int64, pos func() int64, emit func(sampleMeta) error) error {
	tr := tar.NewReader(r)
	g := &group{small: map[string][]byte{}}
	flush := func() error {
		if g.key == "" {
			return nil
		}
		m, err := g.meta()
		if err != nil {
			return err
		}
		return emit(m)
	}
	end := int64(0) // end of the last member's padded data
	for {
		h, err := tr.Next()
		if err == io.EOF {
			// archive/tar reports a clean end also when the archive stops at a member boundary
			// without its marker: the position tells the two apart.
			if p := pos(); p-end < tarEOFMarker {
				return fmt.Errorf("tar: no end-of-archive marker after %d bytes (the shard was cut): %w", end, loaders.ErrCorrupt)
			}
			return flush()
		}
		if err != nil {
			return fmt.Errorf("tar: %w: %w", loaders.ErrCorrupt, err)
		}
		if h.Size < 0 || h.Size > size-pos() {
			return fmt.Errorf("tar: member %q of %d bytes at offset %d reaches past the archive's %d bytes: %w", h.Name, h.Size, pos(), size,
				loaders.ErrCorrupt)
		}
		end = pos() + (h.Size+511)/512*512
		key, ext, ok := sampleMember(h)
		if !ok {
			continue
		}
		if key != g.key {
			if err := flush(); err != nil {
				return err
			}
			g.reset(key)
		}
		off := pos()
		// Members are padded to 512-byte blocks: a missing padding means the archive was cut.
		if h.Size < 0 || off+(h.Size+511)/512*512 > size {
			return fmt.Errorf("sample %q: .%s member of %d bytes at offset %d truncated (archive of %d bytes): %w", key, ext, h.Size, off, size,
				loaders.ErrCorrupt)
		}
		if err := g.add(ext, off, h.Size); err != nil {
			return err
		}
		if ext == "json" || slices.Contains(labelMemberExts, ext) {
			if h.Size > maxSmallMember {
				return fmt.Errorf("sample %q: .%s member of %d bytes: %w", key, ext, h.Size, loaders.ErrCorrupt)
			}
			b := make([]byte, h.Size)
			if _, err := io.ReadFull(tr, b); err != nil {
				return fmt.Errorf("sample %q: .%s member: %w: %w", key, ext, loaders.ErrCorrupt, err)
			}
			g.small[ext] = b
		}
	}
}

// parseRun reads the sample whose run of members (as an index locates it: tar headers, data and
// padding) is b; its payload's offset is within b. A run must hold the members of one sample.
func parseRun(b []byte) (sampleMeta, error) {
	r := bytes.NewReader(b)
	tr := tar.NewReader(r)
	g := &group{small: map[string][]byte{}}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return sampleMeta{}, fmt.Errorf("tar: %w: %w", loaders.ErrCorrupt, err)
		}
		key, ext, ok := sampleMember(h)
		if !ok {
			continue
		}
		if g.key != "" && key != g.key {
			return sampleMeta{}, fmt.Errorf("members of samples %q and %q: %w", g.key, key, loaders.ErrCorrupt)
		}
		g.key = key
		off := int64(len(b)) - int64(r.Len())
		if h.Size < 0 || h.Size > int64(len(b))-off {
			return sampleMeta{}, fmt.Errorf("sample %q: .%s member of %d bytes at offset %d reaches past the run's %d bytes: %w", key, ext, h.Size, off, len(b),
				loaders.ErrCorrupt)
		}
		if err := g.add(ext, off, h.Size); err != nil {
			return sampleMeta{}, err
		}
		if ext == "json" || slices.Contains(labelMemberExts, ext) {
			if h.Size > maxSmallMember {
				return sampleMeta{}, fmt.Errorf("sample %q: .%s member of %d bytes: %w", key, ext, h.Size, loaders.ErrCorrupt)
			}
			g.small[ext] = b[off : off+h.Size]
		}
	}
	if g.key == "" {
		return sampleMeta{}, fmt.Errorf("no sample member: %w", loaders.ErrCorrupt)
	}
	return g.meta()
}
