package transforms

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
)

// Sentinel errors that callers check with errors.Is.
var (
	// ErrTooLarge: the image's header declares more pixels than the Chain allows.
	ErrTooLarge = errors.New("image too large")
	// ErrCorrupt: the encoded bytes are not a decodable image of a supported format.
	ErrCorrupt = errors.New("corrupt image")
	// ErrShape: the input or the destination does not have the shape the Chain needs.
	ErrShape = errors.New("shape mismatch")
	// ErrInvalid: a transform's parameters are invalid (reported by OutShape and Apply).
	ErrInvalid = errors.New("invalid transform")
	// ErrHostPath: the sample cannot leave its pixel work to the device (ApplyCoefficients); Apply
	// transforms it on the host.
	ErrHostPath = errors.New("sample needs the host path")
)

// DefaultMaxPixels is the pixel limit (width x height) of a Chain that did not set one: 100
// megapixels, far above any photo a training set holds, far below what would exhaust memory.
const DefaultMaxPixels = 100_000_000

// Input is one sample before transformation: exactly one of Encoded or Pixels is set.
type Input struct {
	Encoded []byte // encoded image file bytes: JPEG, PNG, GIF, BMP or WebP
	Pixels  []byte // raw uint8 pixels, interleaved HWC, len == H*W*C
	H, W, C int    // shape of Pixels; C is 1 (gray), 3 (RGB) or 4 (RGBA, alpha ignored)
}

// Shape is the shape of an image in channels, height and width.
type Shape struct{ C, H, W int }

// Len returns C*H*W, the number of bytes of a uint8 image of this shape.
func (s Shape) Len() int { return s.C * s.H * s.W }

func (s Shape) String() string { return fmt.Sprintf("%dx%dx%d", s.C, s.H, s.W) }

// Layout is the order of an output image's dimensions.
type Layout uint8

const (
	CHW Layout = iota // planar: all of channel 0, then channel 1, ... (what models consume)
	HWC               // interleaved: the channels of pixel 0, then pixel 1, ...
)

func (l Layout) String() string {
	if l == HWC {
		return "HWC"
	}
	return "CHW"
}

// Filter is the resampling filter of a resize. Downscaling widens the filter by the scale
// (antialiasing), as PIL and torchvision do.
type Filter uint8

const (
	Bilinear Filter = iota // triangle filter, support 1 (torchvision's default)
	Bicubic                // cubic convolution, a = -0.5, support 2
	Lanczos                // Lanczos-3, support 3
)

func (f Filter) String() string {
	switch f {
	case Bicubic:
		return "bicubic"
	case Lanczos:
		return "lanczos"
	}
	return "bilinear"
}

// ParseFilter is the Filter a name gives ("bilinear", "bicubic", "lanczos": String's, and PIL's,
// torchvision's and timm's interpolation names); ok is false for another name.
func ParseFilter(name string) (f Filter, ok bool) {
	for f := Bilinear; f <= Lanczos; f++ {
		if f.String() == name {
			return f, true
		}
	}
	return 0, false
}

// ImageNet's per-channel mean and standard deviation (RGB, on [0,1] values), as torchvision uses.
var (
	ImageNetMean = []float32{0.485, 0.456, 0.406}
	ImageNetStd  = []float32{0.229, 0.224, 0.225}
)

// Transform is one step of a Chain. The functions of this package build the usual ones; a
// type of your own that implements Transform is composed like them (see the example of Cutout).
//
// Plan adds the transform's work on one sample to p, from the sample's size alone, before any of
// its pixels is decoded: geometry through p's Crop, Resize, flip and Rotate90 methods, work on the
// output pixels through p.Pixels. Randomness comes from r, the sample's own generator (the Loader
// reseeds it for every (seed, epoch, sample index), so the draws do not depend on the worker that
// runs the sample); transforms draw from it in Compose order. r is nil when only the output shape
// is wanted (Chain.OutShape) or when the caller of Apply passed none: a random transform then
// takes a deterministic fallback. Plan is called concurrently for different samples, so it must
// not modify its receiver. An error it returns fails the sample; wrap ErrInvalid for bad
// parameters.
type Transform interface {
	Plan(p *Plan, r *rand.Rand) error
	String() string
}

// Chain is an immutable sequence of transforms. The nil or empty Chain decodes Encoded at
// its own size and copies Pixels HWC->CHW unchanged. Safe for concurrent use.
type Chain struct {
	ts        []Transform
	mean, std []float32
	maxPixels int
	decode    DecodeMode
}

// Compose returns the Chain that applies ts in order. Normalize may appear anywhere: it is
// recorded for the float path and the device and never changes the uint8 output.
func Compose(ts ...Transform) *Chain {
	p := &Chain{ts: append([]Transform(nil), ts...), maxPixels: DefaultMaxPixels}
	for _, t := range ts {
		if n, ok := t.(normalize); ok {
			p.mean, p.std = n.mean, n.std
		}
	}
	return p
}

// Append returns a new Chain that applies p's transforms, then ts (with p's pixel limit); p is
// unchanged. A nil p gives Compose(ts...). A Normalize in ts replaces p's.
func (p *Chain) Append(ts ...Transform) *Chain {
	q := Compose(append(append([]Transform(nil), p.transforms()...), ts...)...)
	q.maxPixels = p.limit()
	return q
}

// Train is torchvision's ImageNet training transform: RandomResizedCrop(size),
// HorizontalFlip(0.5), Normalize(ImageNetMean, ImageNetStd).
func Train(size int) *Chain {
	return Compose(RandomResizedCrop(size), HorizontalFlip(0.5), Normalize(ImageNetMean, ImageNetStd))
}

// Eval is torchvision's ImageNet evaluation transform: Resize(size*8/7) (256 for 224),
// CenterCrop(size), Normalize(ImageNetMean, ImageNetStd), with ExactDecode, so that a model
// evaluated or served here sees the pixels torchvision would give it.
func Eval(size int) *Chain {
	return Compose(Resize(size*8/7), CenterCrop(size), Normalize(ImageNetMean, ImageNetStd)).WithDecode(ExactDecode)
}

// DecodeMode says how a Chain decodes JPEG images (other formats have one decoder each).
type DecodeMode uint8

const (
	// FastDecode, the default of Compose and Train, decodes only the blocks the crop needs, at
	// the reduced scale (1/2, 1/4, 1/8) that still leaves a decoded sample per output pixel, and
	// resamples straight from the Y, Cb and Cr planes. Its pixels differ from PIL's by a few
	// levels (more at small outputs), which augmentation drowns in training.
	FastDecode DecodeMode = iota
	// ExactDecode, the default of Eval, decodes at full scale as libjpeg-turbo does with its
	// default parameters, the decoder of PIL and so of torchvision (integer IDCT, fancy chroma
	// upsampling, its YCbCr->RGB conversion; CMYK converted as PIL's convert("RGB")), then
	// resamples the RGB pixels: PIL's decode bit for bit on valid files, and, with Resize and
	// CenterCrop, what torchvision's transforms give. It still decodes only the blocks the crop
	// needs; it costs more than FastDecode (the full-scale IDCT and the colour conversion of the
	// whole crop).
	ExactDecode
	// DeviceDecode splits FastDecode between the host and the device: a Loader whose Chain has it
	// entropy-decodes a JPEG sample on the host (Worker.ApplyCoefficients) and has the device
	// reconstruct, resample and colour-convert it (kernels' RenderRecords), the same pixels as
	// FastDecode's; the samples the device cannot take (ErrHostPath) take FastDecode's host path
	// in the same batch. Apply, which runs on the host, decodes as FastDecode.
	DeviceDecode
)

// String is "fast", "exact" or "device" (ParseDecodeMode's names), or the number of another
// mode.
func (m DecodeMode) String() string {
	switch m {
	case FastDecode:
		return "fast"
	case ExactDecode:
		return "exact"
	case DeviceDecode:
		return "device"
	}
	return fmt.Sprintf("DecodeMode(%d)", uint8(m))
}

// ParseDecodeMode returns the mode named "fast", "exact" or "device" (as String writes them), or
// an error wrapping ErrInvalid.
func ParseDecodeMode(s string) (DecodeMode, error) {
	switch s {
	case "fast":
		return FastDecode, nil
	case "exact":
		return ExactDecode, nil
	case "device":
		return DeviceDecode, nil
	}
	return 0, fmt.Errorf("transforms: decode mode %q (want fast, exact or device): %w", s, ErrInvalid)
}

// WithDecode returns a copy of p that decodes JPEG images in mode m. A mode other than
// FastDecode, ExactDecode and DeviceDecode makes Apply fail with ErrInvalid.
func (p *Chain) WithDecode(m DecodeMode) *Chain {
	q := Chain{maxPixels: DefaultMaxPixels}
	if p != nil {
		q = *p
	}
	q.decode = m
	return &q
}

// DecodeMode returns the JPEG decode mode of p (FastDecode for the nil Chain).
func (p *Chain) DecodeMode() DecodeMode {
	if p == nil {
		return FastDecode
	}
	return p.decode
}

// WithMaxPixels returns a copy of p whose decoders reject images of more than n pixels with
// ErrTooLarge; n <= 0 means DefaultMaxPixels.
func (p *Chain) WithMaxPixels(n int) *Chain {
	q := Chain{maxPixels: DefaultMaxPixels}
	if p != nil {
		q = *p
	}
	if n <= 0 {
		n = DefaultMaxPixels
	}
	q.maxPixels = n
	return &q
}

// Admit checks an image's header against the Chain's limits before anything is decoded: at most
// the Chain's pixel limit (WithMaxPixels, DefaultMaxPixels), and at most 4 bytes of decoded
// memory per allowed pixel (ImageInfo.DecodedBytes), so that a 16-bit PNG counts for what it
// takes. Images over either limit are an error wrapping ErrTooLarge.
func (p *Chain) Admit(info ImageInfo) error {
	px := int64(info.Width) * int64(info.Height)
	if px > int64(p.limit()) {
		return fmt.Errorf("transforms: %s of %dx%d pixels (limit %d): %w", info.Format, info.Width, info.Height, p.limit(), ErrTooLarge)
	}
	if info.DecodedBytes > 4*int64(p.limit()) {
		return fmt.Errorf("transforms: %s of %dx%d pixels decodes to %d bytes (limit %d): %w", info.Format, info.Width, info.Height, info.DecodedBytes,
			4*int64(p.limit()), ErrTooLarge)
	}
	return nil
}

func (p *Chain) limit() int {
	if p == nil || p.maxPixels <= 0 {
		return DefaultMaxPixels
	}
	return p.maxPixels
}

func (p *Chain) transforms() []Transform {
	if p == nil {
		return nil
	}
	return p.ts
}

func (p *Chain) String() string {
	var b strings.Builder
	b.WriteString("Compose(")
	for i, t := range p.transforms() {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(t.String())
	}
	b.WriteString(")")
	if m := p.DecodeMode(); m != FastDecode {
		fmt.Fprintf(&b, ".WithDecode(%v)", m)
	}
	return b.String()
}

// Normalization returns the mean and standard deviation of the Chain's Normalize step, which
// Apply leaves for the device: out = (float32(v)/255 - mean[c]) / std[c]. ok is false when the
// Chain does not normalize. The slices are copies.
func (p *Chain) Normalization() (mean, std []float32, ok bool) {
	if p == nil || p.mean == nil {
		return nil, nil, false
	}
	return append([]float32(nil), p.mean...), append([]float32(nil), p.std...), true
}

// OutShape returns the shape Apply produces for an input of shape in (for encoded images: the
// decoded size and the channel count wanted, 1 or 3). Chains that end in a fixed-size crop or
// resize return that size whatever in is. A 4-channel input gives 3 output channels (alpha is
// dropped). Errors wrap ErrShape or ErrInvalid.
func (p *Chain) OutShape(in Shape) (Shape, error) {
	if in.H <= 0 || in.W <= 0 {
		return Shape{}, fmt.Errorf("transforms: input shape %v: %w", in, ErrShape)
	}
	c, err := outChannels(in.C)
	if err != nil {
		return Shape{}, err
	}
	var pl Plan
	pl.reset(in.W, in.H)
	if err := p.planAll(&pl, nil); err != nil {
		return Shape{}, err
	}
	if err := p.checkNorm(c); err != nil {
		return Shape{}, err
	}
	w, h := pl.Size()
	return Shape{C: c, H: h, W: w}, nil
}

func outChannels(c int) (int, error) {
	switch c {
	case 1, 3:
		return c, nil
	case 4:
		return 3, nil
	}
	return 0, fmt.Errorf("transforms: %d channels (want 1, 3 or 4): %w", c, ErrShape)
}

func (p *Chain) planAll(pl *Plan, r *rand.Rand) error {
	for i, t := range p.transforms() {
		before := len(pl.post)
		if err := t.Plan(pl, r); err != nil {
			return err
		}
		for k := before; k < len(pl.post); k++ {
			pl.post[k].owner = i
		}
		if pl.late {
			return fmt.Errorf("transforms: %v: geometry after a step that works on the output pixels (RandomRotation, an augmentation "+
				"policy, RandomAffine, RandomPerspective, RandomErasing, GaussianBlur, Plan.Pixels): put it before them: %w", t, ErrInvalid)
		}
		if w, h := pl.Size(); w > maxSide || h > maxSide {
			return fmt.Errorf("transforms: %v: output %dx%d: %w", t, w, h, ErrInvalid)
		}
	}
	if pl.x.n <= 0 || pl.y.n <= 0 {
		return fmt.Errorf("transforms: %v: empty output: %w", p, ErrInvalid)
	}
	return nil
}

func (p *Chain) checkNorm(c int) error {
	if p == nil || p.mean == nil {
		return nil
	}
	if len(p.mean) != c && len(p.mean) != 1 {
		return fmt.Errorf("transforms: Normalize has %d means for %d channels: %w", len(p.mean), c, ErrShape)
	}
	return nil
}

// Resize scales the image so that its shorter side is size pixels, keeping the aspect ratio
// (the longer side becomes int(size*long/short), as torchvision computes it), with the Bilinear
// filter.
func Resize(size int) Transform { return resize{size: size, filter: Bilinear} }

// ResizeFilter is Resize with the given filter.
func ResizeFilter(size int, f Filter) Transform { return resize{size: size, filter: f} }

// ResizeTo scales the image to exactly h x w pixels (aspect ratio not kept), with the Bilinear
// filter.
func ResizeTo(h, w int) Transform { return resize{h: h, w: w, filter: Bilinear} }

type resize struct {
	size, h, w int
	filter     Filter
}

func (t resize) String() string {
	if t.size == 0 {
		return fmt.Sprintf("ResizeTo(%d, %d, %v)", t.h, t.w, t.filter)
	}
	return fmt.Sprintf("Resize(%d, %v)", t.size, t.filter)
}

func (t resize) Plan(p *Plan, _ *rand.Rand) error {
	if t.filter > Lanczos {
		return fmt.Errorf("transforms: %v: unknown filter: %w", t, ErrInvalid)
	}
	h, w := t.h, t.w
	if t.size != 0 {
		if t.size < 0 {
			return fmt.Errorf("transforms: %v: negative size: %w", t, ErrInvalid)
		}
		W, H := p.Size()
		if W <= H {
			w, h = t.size, int(int64(t.size)*int64(H)/int64(W))
		} else {
			h, w = t.size, int(int64(t.size)*int64(W)/int64(H))
		}
	}
	if h <= 0 || w <= 0 || h > maxSide || w > maxSide {
		W, H := p.Size()
		return fmt.Errorf("transforms: %v of %dx%d: output %dx%d: %w", t, W, H, w, h, ErrInvalid)
	}
	p.Resize(w, h, t.filter)
	return nil
}

// maxSide bounds output sides so that no transform asks for an absurd allocation.
const maxSide = 1 << 15

// CenterCrop crops the central size x size pixels (top = round((H-size)/2), as torchvision); an
// image smaller than size is padded with zeros.
func CenterCrop(size int) Transform { return centerCrop{size} }

type centerCrop struct{ size int }

func (t centerCrop) String() string { return fmt.Sprintf("CenterCrop(%d)", t.size) }

func (t centerCrop) Plan(p *Plan, _ *rand.Rand) error {
	if t.size <= 0 || t.size > maxSide {
		return fmt.Errorf("transforms: %v: %w", t, ErrInvalid)
	}
	W, H := p.Size()
	top := int(math.RoundToEven(float64(H-t.size) / 2))
	left := int(math.RoundToEven(float64(W-t.size) / 2))
	p.Crop(left, top, t.size, t.size)
	return nil
}

// RandomResizedCrop crops a random box and resizes it to size x size with the Bilinear filter,
// following torchvision exactly: up to 10 attempts draw an area fraction uniform in [0.08, 1) and
// a log-uniform aspect ratio in [3/4, 4/3); the first box that fits is placed uniformly; if none
// fits, the central crop clamped to that ratio range is used.
func RandomResizedCrop(size int) Transform {
	return rrc{size: size, scale: [2]float64{0.08, 1}, ratio: [2]float64{3.0 / 4, 4.0 / 3}}
}

// RandomResizedCropWith is RandomResizedCrop with the area-fraction range scale and the aspect
// ratio range ratio (0 < scale[0] <= scale[1] <= 1, 0 < ratio[0] <= ratio[1]).
func RandomResizedCropWith(size int, scale, ratio [2]float64) Transform {
	return rrc{size: size, scale: scale, ratio: ratio}
}

type rrc struct {
	size         int
	scale, ratio [2]float64
}

func (t rrc) String() string {
	return fmt.Sprintf("RandomResizedCrop(%d, scale=%v, ratio=%v)", t.size, t.scale, t.ratio)
}

func (t rrc) Plan(p *Plan, r *rand.Rand) error {
	if t.size <= 0 || t.size > maxSide || !(t.scale[0] > 0 && t.scale[0] <= t.scale[1] && t.scale[1] <= 1) ||
		!(t.ratio[0] > 0 && t.ratio[0] <= t.ratio[1]) {
		return fmt.Errorf("transforms: %v: %w", t, ErrInvalid)
	}
	W, H := p.Size()
	x, y, w, h := t.box(W, H, r)
	p.Crop(x, y, w, h)
	p.Resize(t.size, t.size, Bilinear)
	return nil
}

// box is torchvision's RandomResizedCrop.get_params. A nil r (shape inference) takes the fallback.
func (t rrc) box(width, height int, r *rand.Rand) (x, y, w, h int) {
	area := float64(width) * float64(height)
	lr0, lr1 := math.Log(t.ratio[0]), math.Log(t.ratio[1])
	for range 10 {
		if r == nil {
			break
		}
		target := area * (t.scale[0] + r.Float64()*(t.scale[1]-t.scale[0]))
		aspect := math.Exp(lr0 + r.Float64()*(lr1-lr0))
		w := int(math.RoundToEven(math.Sqrt(target * aspect)))
		h := int(math.RoundToEven(math.Sqrt(target / aspect)))
		if 0 < w && w <= width && 0 < h && h <= height {
			y := r.IntN(height - h + 1)
			x := r.IntN(width - w + 1)
			return x, y, w, h
		}
	}
	in := float64(width) / float64(height)
	switch {
	case in < t.ratio[0]:
		w, h = width, int(math.RoundToEven(float64(width)/t.ratio[0]))
	case in > t.ratio[1]:
		h, w = height, int(math.RoundToEven(float64(height)*t.ratio[1]))
	default:
		w, h = width, height
	}
	return (width - w) / 2, (height - h) / 2, w, h
}

// HorizontalFlip mirrors the image left-right with probability p (drawn as r.Float64() < p).
func HorizontalFlip(p float64) Transform { return flip{p: p} }

// VerticalFlip mirrors the image top-bottom with probability p (drawn as r.Float64() < p).
func VerticalFlip(p float64) Transform { return flip{p: p, vertical: true} }

type flip struct {
	p        float64
	vertical bool
}

func (t flip) String() string {
	if t.vertical {
		return fmt.Sprintf("VerticalFlip(%g)", t.p)
	}
	return fmt.Sprintf("HorizontalFlip(%g)", t.p)
}

func (t flip) Plan(p *Plan, r *rand.Rand) error {
	p.geometry() // even when it does not flip: a sample that does would fail after a pixel step
	if r == nil || r.Float64() >= t.p {
		return nil
	}
	if t.vertical {
		p.FlipVertical()
	} else {
		p.FlipHorizontal()
	}
	return nil
}

// ColorJitter changes brightness, contrast and saturation by factors drawn uniformly from
// [max(0, 1-x), 1+x], applied in a random order as torchvision does (blends with black, with the
// mean grey level of the output image, and with each pixel's grey value). Zero disables a part.
// It acts on the output pixels: the contrast mean is that of the final crop, whatever its
// position in Compose. Saturation leaves 1-channel outputs unchanged.
func ColorJitter(brightness, contrast, saturation float64) Transform {
	return jitter{brightness, contrast, saturation, 0}
}

type jitter struct{ b, c, s, h float64 }

func (t jitter) String() string {
	if t.h != 0 {
		return fmt.Sprintf("ColorJitterHue(%g, %g, %g, %g)", t.b, t.c, t.s, t.h)
	}
	return fmt.Sprintf("ColorJitter(%g, %g, %g)", t.b, t.c, t.s)
}

func (t jitter) Plan(p *Plan, r *rand.Rand) error {
	if t.b < 0 || t.c < 0 || t.s < 0 || math.IsNaN(t.b+t.c+t.s) || math.IsInf(t.b+t.c+t.s, 0) || !(t.h >= 0 && t.h <= 0.5) {
		return fmt.Errorf("transforms: %v: %w", t, ErrInvalid)
	}
	if r == nil {
		return nil
	}
	var f [4]float64
	for i, x := range [3]float64{t.b, t.c, t.s} {
		f[i] = 1
		if x > 0 {
			lo := max(0, 1-x)
			f[i] = lo + r.Float64()*(1+x-lo)
		}
	}
	parts := 3
	if t.h > 0 { // hue 0 draws exactly what ColorJitter always drew
		f[3] = -t.h + r.Float64()*2*t.h
		parts = 4
	}
	order := [4]uint8{0, 1, 2, 3}
	r.Shuffle(parts, func(i, j int) { order[i], order[j] = order[j], order[i] })
	for _, k := range order[:parts] {
		switch {
		case k == 3:
			p.post = append(p.post, pixelOp{kind: opHue, f: f[3]})
		case [3]float64{t.b, t.c, t.s}[k] > 0:
			p.post = append(p.post, pixelOp{kind: k, f: f[k]})
		}
	}
	return nil
}

// CheckNormalization reports the first channel whose mean is not finite or whose std is not
// finite and positive; mean and std have a value per channel.
func CheckNormalization(mean, std []float32) error {
	for c, s := range std {
		if !(s > 0) || math.IsInf(float64(s), 0) || math.IsNaN(float64(mean[c])) || math.IsInf(float64(mean[c]), 0) {
			return fmt.Errorf("channel %d: mean %v, std %v; want finite, std > 0", c, mean[c], s)
		}
	}
	return nil
}

// Normalize records the per-channel mean and standard deviation (of [0,1] values) that the
// float path (ApplyFloat32) applies and that Normalization reports for the device. It does not
// change the uint8 output. One value applies to every channel.
func Normalize(mean, std []float32) Transform {
	return normalize{append([]float32(nil), mean...), append([]float32(nil), std...)}
}

type normalize struct{ mean, std []float32 }

func (t normalize) String() string { return fmt.Sprintf("Normalize(%v, %v)", t.mean, t.std) }

func (t normalize) Plan(*Plan, *rand.Rand) error {
	if len(t.mean) == 0 || len(t.mean) != len(t.std) {
		return fmt.Errorf("transforms: %v: mean and std lengths differ: %w", t, ErrInvalid)
	}
	for _, s := range t.std {
		if !(s > 0) || math.IsInf(float64(s), 0) {
			return fmt.Errorf("transforms: %v: std must be positive: %w", t, ErrInvalid)
		}
	}
	return nil
}
