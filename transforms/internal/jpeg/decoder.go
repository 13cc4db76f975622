// Package jpeg is a fork of the Go standard library's image/jpeg decoder (Go 1.26; BSD licence,
// in LICENSE here) that decodes only what a crop needs, into reusable memory:
//
//   - Options.Scale 2, 4 or 8 reconstructs each 8x8 block at 4x4, 2x2 or 1x1 samples with a
//     reduced-size IDCT (libjpeg's scale_denom), for crops much larger than their output;
//   - Options.Region limits the inverse DCT to the blocks of the region (planes hold only
//     those), blocks beside it are entropy-decoded without being stored, and a sequential scan
//     stops reading after the region's last MCU;
//   - sequential scans decode their entropy-coded bits straight from the input, 64 bits at a
//     time, with a combined 9-bit lookup of AC code and value;
//   - planes and coefficient buffers belong to the Decoder and are reused, so a warm Decoder
//     allocates nothing per image;
//   - the result stays in Y, Cb, Cr (or gray) planes: no colour conversion happens here.
//
// The encoder, DecodeConfig, image.Image results and 4-component (CMYK) images are not part of
// the fork; 4-component images return an UnsupportedError.
//
// # Concurrency
//
// A Decoder is not safe for concurrent use.
//
// # Ownership
//
// The Image returned by Decode, and its planes, belong to the Decoder and are overwritten by its
// next Decode.
package jpeg

import "image"

// Decoder decodes JPEG images into planes it owns. The zero value is ready to use.
type Decoder struct {
	d    decoder
	img  Image
	pix  [maxComponents][]byte
	prog [maxComponents][]block
}

// Options say what part of an image to decode and at what scale.
type Options struct {
	// Scale is 1, 2, 4 or 8 (0 means 1): planes hold ceil(size/Scale) samples per side.
	Scale int
	// Region is the part of the image, in full-resolution pixels, that must be decoded; samples
	// outside it (beyond whole MCUs) read as zero. The empty rectangle means the whole image.
	Region image.Rectangle
	// MaxPixels, if positive, rejects frames of more pixels with an UnsupportedError before any
	// plane is allocated.
	MaxPixels int
}

// Plane is the decoded part of one component: it holds the samples (X0+x, Y0+y) of the
// component for x < W and y < H, sample (X0+x, Y0+y) at Pix[y*Stride+x]. Without a region it is
// the whole component (X0 = Y0 = 0).
type Plane struct {
	Pix        []byte
	Stride     int
	X0, Y0     int
	W, H       int
	SubX, SubY int // full-resolution pixels per sample (at Scale 1), e.g. 2, 2 for 4:2:0 chroma
}

// Image is a decoded JPEG: 1 (gray) or 3 (YCbCr, or RGB when RGB is set) planes.
type Image struct {
	Width, Height int // full-resolution size
	Comps         int
	RGB           bool
	Scale         int
	Planes        [3]Plane
}

// Decode decodes data. Errors are FormatError (corrupt data), UnsupportedError (valid but not
// handled here: 4-component, lossless, arithmetic-coded, 12-bit) or io.ErrUnexpectedEOF.
func (dec *Decoder) Decode(data []byte, opt Options) (*Image, error) {
	scale := opt.Scale
	switch scale {
	case 0:
		scale = 1
	case 1, 2, 4, 8:
	default:
		return nil, UnsupportedError("scale")
	}
	d := &dec.d
	*d = decoder{src: data, all: data, pool: dec, scale: scale, bs: 8 / scale}
	if err := d.readFull(d.tmp[:2]); err != nil {
		return nil, err
	}
	if d.tmp[0] != 0xff || d.tmp[1] != soiMarker {
		return nil, FormatError("missing SOI marker")
	}
	// The region in MCUs is known once the frame header gives the sampling factors (setRegion).
	d.rx0, d.ry0, d.rx1, d.ry1 = 0, 0, 1<<30, 1<<30
	d.region, d.maxPixels = opt.Region, opt.MaxPixels
	if err := d.decode(); err != nil {
		return nil, err
	}
	m := &dec.img
	*m = Image{Width: d.width, Height: d.height, Comps: d.nComp, Scale: scale}
	m.RGB = d.nComp == 3 && d.isRGB()
	h0, v0 := d.comp[0].h, d.comp[0].v
	for i := range d.nComp {
		c := d.comp[i]
		sx, sy := h0/c.h, v0/c.v
		x0, y0 := d.rx0*c.h*d.bs, d.ry0*c.v*d.bs
		m.Planes[i] = Plane{
			Pix: d.pix[i], Stride: d.stride[i],
			X0: x0, Y0: y0,
			W:    min((d.width+sx*scale-1)/(sx*scale), (d.rx1*c.h*d.bs)) - x0,
			H:    min((d.height+sy*scale-1)/(sy*scale), (d.ry1*c.v*d.bs)) - y0,
			SubX: sx, SubY: sy,
		}
	}
	return m, nil
}

// setRegion converts the requested pixel region to MCUs once the frame header is known.
func (d *decoder) setRegion() {
	r := d.region
	if r.Empty() {
		return
	}
	mw, mh := 8*d.comp[0].h, 8*d.comp[0].v
	d.rx0, d.rx1 = max(r.Min.X, 0)/mw, (r.Max.X+mw-1)/mw
	d.ry0, d.ry1 = max(r.Min.Y, 0)/mh, (r.Max.Y+mh-1)/mh
}
