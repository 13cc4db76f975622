// Package transforms owns the per-sample work between a sample's bytes and its place in a batch:
// decoding (JPEG, PNG, GIF, BMP, WebP, raw pixels), geometric augmentation (Resize, CenterCrop,
// RandomResizedCrop, RandomCrop with padding, HorizontalFlip, VerticalFlip, Rotate90,
// RandomRotate90), augmentation of the output pixels (ColorJitter and ColorJitterHue,
// RandomRotation, torchvision's TrivialAugmentWide, RandAugment and AutoAugment, RandomAffine,
// RandomPerspective, RandomErasing, GaussianBlur, RandomGrayscale), and the output layout (uint8
// or float32, CHW or HWC). The augmentations of torchvision follow its functional ops on a uint8
// tensor byte for byte (float32 arithmetic, its truncations and roundings), checked against
// torchvision 0.14 by TestTorchvisionParity. Mix is batch-level MixUp and CutMix on a uint8 batch
// in its host slot. Transform is an open interface: a type of your own that
// plans its work on a Plan composes like the package's transforms (see the Cutout example).
//
// A Chain is an immutable description built by Compose (or the ImageNet recipes Train and
// Eval). A Worker executes it: Apply decodes one Input and writes the transformed pixels straight
// into the caller's slot (dst first). The geometry of the whole Chain is planned before any
// pixel is touched, from the image's header alone; the pixels are then resampled once, directly
// from the decoded planes (for JPEG: the Y, Cb and Cr planes, so only output pixels are ever
// converted to RGB), and each output pixel is written once into dst in its final layout. For JPEG
// the decoder itself is told the crop: it inverse-transforms only the blocks the crop touches, stops
// reading the scan after the crop's last row, and, in FastDecode (the default, and Train's), uses
// a reduced-size IDCT (1/2, 1/4, 1/8, as libjpeg's scale_denom) when the crop is at least that
// many times larger than the output. ExactDecode (Eval's default, Chain.WithDecode) decodes the
// crop's blocks at full scale as libjpeg-turbo does for PIL, and so for torchvision (its integer
// IDCT, fancy chroma upsampling and RGB conversion), then resamples RGB: with Resize and
// CenterCrop its output is torchvision's, byte for byte on the test corpus, where FastDecode's
// differs by about 0.5/255 on average at 224 pixels and 1.4/255 at 32.
//
// For a device that decodes JPEG, ApplyCoefficients does the host's half
// of a JPEG sample: the plan, and the entropy decode of the crop's blocks into a self-contained
// record of their quantized coefficients and the resampling's geometry (about a third of the
// bytes of 224x224 RGB pixels on photos); Render is the reference of the device's half, the
// record to Apply's pixels byte for byte. Samples the device cannot take (other formats, pixel
// steps, ExactDecode, ...) are ErrHostPath, for Apply.
//
// Randomness comes from the caller's *rand.Rand (math/rand/v2), the sample's own generator: a
// Loader seeds one per (seed, epoch, sample index), so the output depends only on the sample and
// never on the Worker that ran it. ApplyFloat32 computes
// (float32(v)/255 - mean[c]) / std[c] on the CPU from the same uint8 pixels Apply writes, so the
// device-side normalization of Apply's output (Chain.Normalization gives mean and std) agrees
// with it to within 1e-6, in either of its float32 forms (divide, or multiply by 1/(255 std) and
// add -mean/std).
//
// Bad input never panics: headers are read before decoding, images over the Chain's pixel
// limit (DefaultMaxPixels unless WithMaxPixels says otherwise) return an error wrapping
// ErrTooLarge, and corrupt or truncated data returns an error wrapping ErrCorrupt.
//
// # Concurrency
//
// A Chain is immutable and safe for concurrent use. A Worker is not: give each goroutine its
// own Worker (Chain.NewWorker). Workers share nothing, so N workers scale with N cores.
//
// # Ownership
//
// Apply reads in.Encoded or in.Pixels and writes dst; it keeps no reference to either after it
// returns. All scratch memory belongs to the Worker and is reused from sample to sample, so a warm
// Worker allocates nothing per JPEG or raw-pixel sample (other formats are decoded by the standard
// library and golang.org/x/image, which allocate).
package transforms
