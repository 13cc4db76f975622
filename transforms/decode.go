package transforms

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"image/color"
	_ "image/gif" // registers GIF with image.Decode
	_ "image/png" // registers PNG with image.Decode

	_ "golang.org/x/image/bmp"  // registers BMP with image.Decode
	_ "golang.org/x/image/webp" // registers WebP with image.Decode

	ijpeg "github.com/stoke-ml/stoke/transforms/internal/jpeg"
)

// ImageInfo is what an encoded image's header says.
type ImageInfo struct {
	Format string // "jpeg", "png", "gif", "bmp" or "webp"
	// Width and Height are the displayed size: for a JPEG whose EXIF orientation rotates it by
	// 90 degrees they are the stored height and width.
	Width, Height int
	Orientation   int // EXIF orientation 1..8 (JPEG only; 1 for everything else)
	// DecodedBytes is the memory a full decode takes: the bytes per pixel of the header's colour
	// model (up to 8 for 16-bit RGBA PNG) times the pixels, plus 3 bytes per pixel for the models
	// converted to RGB after decoding (16-bit, paletted, CMYK).
	DecodedBytes int64
}

// DecodeInfo reads only the header of an encoded image. Unknown formats and malformed headers
// return an error wrapping ErrCorrupt. It does not apply a pixel limit (Apply does).
func DecodeInfo(b []byte) (ImageInfo, error) {
	info, _, err := decodeInfo(b)
	return info, err
}

// decodeInfo also returns the stored (pre-orientation) size.
func decodeInfo(b []byte) (info ImageInfo, stored [2]int, err error) {
	if len(b) == 0 {
		return ImageInfo{}, stored, fmt.Errorf("transforms: empty image (0 bytes): %w", ErrCorrupt)
	}
	if len(b) >= 2 && b[0] == 0xff && b[1] == 0xd8 {
		w, h, o, err := jpegHeader(b)
		if err != nil {
			return ImageInfo{}, stored, err
		}
		// YCbCr or RGB planes; a CMYK JPEG (4 bytes, then converted) is counted at its worst.
		info = ImageInfo{Format: "jpeg", Width: w, Height: h, Orientation: o, DecodedBytes: 7 * int64(w) * int64(h)}
		stored = [2]int{w, h}
		if exifOrientation(o).transpose {
			info.Width, info.Height = h, w
		}
		return info, stored, nil
	}
	cfg, format, err := image.DecodeConfig(bytes.NewReader(b))
	if err != nil {
		return ImageInfo{}, stored, fmt.Errorf("transforms: reading header: %w: %w", ErrCorrupt, err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return ImageInfo{}, stored, fmt.Errorf("transforms: %s header: %dx%d pixels: %w", format, cfg.Width, cfg.Height, ErrCorrupt)
	}
	px := int64(cfg.Width) * int64(cfg.Height)
	return ImageInfo{Format: format, Width: cfg.Width, Height: cfg.Height, Orientation: 1, DecodedBytes: decodedBytes(cfg.ColorModel) * px},
		[2]int{cfg.Width, cfg.Height}, nil
}

// decodedBytes is the memory per pixel of decoding into model m, with the RGB conversion of the
// models that setImage converts.
func decodedBytes(m color.Model) int64 {
	switch m {
	case color.GrayModel:
		return 1
	case color.RGBAModel, color.NRGBAModel:
		return 4
	case color.YCbCrModel:
		return 3
	case color.NYCbCrAModel:
		return 4
	case color.Gray16Model:
		return 2 + 3
	case color.RGBA64Model, color.NRGBA64Model:
		return 8 + 3
	}
	if _, ok := m.(color.Palette); ok {
		return 1 + 3
	}
	return 8 + 3 // unknown: the widest
}

var errTruncated = errors.New("truncated header")

// jpegHeader walks the JPEG markers up to the first frame header, returning the frame's size and
// the EXIF orientation (1 when absent or unreadable: a bad EXIF block must not cost the image).
func jpegHeader(b []byte) (w, h, orient int, err error) {
	orient = 1
	i := 2
	for {
		// Skip fill bytes and find the next marker.
		for i < len(b) && b[i] != 0xff {
			i++
		}
		for i < len(b) && b[i] == 0xff {
			i++
		}
		if i >= len(b) {
			return 0, 0, 0, fmt.Errorf("transforms: jpeg: no frame header: %w: %w", ErrCorrupt, errTruncated)
		}
		m := b[i]
		i++
		if m == 0xd8 || m == 0x01 || (m >= 0xd0 && m <= 0xd7) {
			continue // markers without a length
		}
		if m == 0xd9 || m == 0xda {
			return 0, 0, 0, fmt.Errorf("transforms: jpeg: no frame header before marker %#x: %w", m, ErrCorrupt)
		}
		if i+2 > len(b) {
			return 0, 0, 0, fmt.Errorf("transforms: jpeg: %w: %w", ErrCorrupt, errTruncated)
		}
		n := int(binary.BigEndian.Uint16(b[i:]))
		if n < 2 || i+n > len(b) {
			return 0, 0, 0, fmt.Errorf("transforms: jpeg: segment %#x of %d bytes: %w: %w", m, n, ErrCorrupt, errTruncated)
		}
		seg := b[i+2 : i+n]
		i += n
		switch {
		case m == 0xe1:
			if o, ok := exifOrient(seg); ok {
				orient = o
			}
		case m == 0xc0 || m == 0xc1 || m == 0xc2:
			if len(seg) < 6 {
				return 0, 0, 0, fmt.Errorf("transforms: jpeg: short frame header: %w", ErrCorrupt)
			}
			h = int(binary.BigEndian.Uint16(seg[1:]))
			w = int(binary.BigEndian.Uint16(seg[3:]))
			if w == 0 || h == 0 {
				return 0, 0, 0, fmt.Errorf("transforms: jpeg: frame of %dx%d pixels: %w", w, h, ErrCorrupt)
			}
			return w, h, orient, nil
		case m >= 0xc3 && m <= 0xcf && m != 0xc4 && m != 0xc8 && m != 0xcc:
			return 0, 0, 0, fmt.Errorf("transforms: jpeg: unsupported frame type %#x (lossless, hierarchical or arithmetic): %w", m, ErrCorrupt)
		}
	}
}

// exifOrient reads tag 0x0112 (Orientation) from IFD0 of an APP1 Exif segment.
func exifOrient(seg []byte) (int, bool) {
	if len(seg) < 14 || string(seg[:6]) != "Exif\x00\x00" {
		return 0, false
	}
	t := seg[6:]
	var bo binary.ByteOrder
	switch string(t[:4]) {
	case "II*\x00":
		bo = binary.LittleEndian
	case "MM\x00*":
		bo = binary.BigEndian
	default:
		return 0, false
	}
	off := int(bo.Uint32(t[4:]))
	if off < 8 || off+2 > len(t) {
		return 0, false
	}
	n := int(bo.Uint16(t[off:]))
	for e := range n {
		p := off + 2 + 12*e
		if p+12 > len(t) {
			return 0, false
		}
		if bo.Uint16(t[p:]) == 0x0112 && bo.Uint16(t[p+2:]) == 3 {
			o := int(bo.Uint16(t[p+8:]))
			if o >= 1 && o <= 8 {
				return o, true
			}
			return 0, false
		}
	}
	return 0, false
}

// srcKind is the colour model of a source's planes.
type srcKind uint8

const (
	kindGray srcKind = iota
	kindYCbCr
	kindRGB
)

// source is a decoded image as planes, in stored orientation, w x h full-resolution pixels.
type source struct {
	kind   srcKind
	planes [3]plane
	w, h   int
}

func (s *source) setGray(pix []byte, stride, w, h int) {
	*s = source{kind: kindGray, w: w, h: h}
	s.planes[0] = plane{pix: pix, stride: stride, step: 1, w: w, h: h, rx: 1, ry: 1}
}

// setInterleaved sets an RGB source from interleaved pixels of step bytes (3 or 4).
func (s *source) setInterleaved(pix []byte, stride, step, w, h int) {
	*s = source{kind: kindRGB, w: w, h: h}
	for c := range 3 {
		s.planes[c] = plane{pix: pix[c:], stride: stride, step: step, w: w, h: h, rx: 1, ry: 1}
	}
}

// setJPEG sets the source to the planes of the fork's decode (or of a Reconstruct).
func (s *source) setJPEG(im *ijpeg.Image) {
	*s = source{kind: kindYCbCr, w: im.Width, h: im.Height}
	switch {
	case im.Comps == 1:
		s.kind = kindGray
	case im.RGB:
		s.kind = kindRGB
	}
	for i := range im.Comps {
		p := &im.Planes[i]
		s.planes[i] = plane{pix: p.Pix, stride: p.Stride, step: 1, w: p.W, h: p.H, x0: p.X0, y0: p.Y0,
			rx: 1 / float64(p.SubX*im.Scale), ry: 1 / float64(p.SubY*im.Scale)}
	}
}

func (s *source) setYCbCr(m *image.YCbCr) {
	r := m.Rect
	w, h := r.Dx(), r.Dy()
	*s = source{kind: kindYCbCr, w: w, h: h}
	s.planes[0] = plane{pix: m.Y[m.YOffset(r.Min.X, r.Min.Y):], stride: m.YStride, step: 1, w: w, h: h, rx: 1, ry: 1}
	sx, sy := subsampling(m.SubsampleRatio)
	cw, ch := (w+sx-1)/sx, (h+sy-1)/sy
	co := m.COffset(r.Min.X, r.Min.Y)
	s.planes[1] = plane{pix: m.Cb[co:], stride: m.CStride, step: 1, w: cw, h: ch, rx: 1 / float64(sx), ry: 1 / float64(sy)}
	s.planes[2] = plane{pix: m.Cr[co:], stride: m.CStride, step: 1, w: cw, h: ch, rx: 1 / float64(sx), ry: 1 / float64(sy)}
}

func subsampling(r image.YCbCrSubsampleRatio) (sx, sy int) {
	switch r {
	case image.YCbCrSubsampleRatio422:
		return 2, 1
	case image.YCbCrSubsampleRatio420:
		return 2, 2
	case image.YCbCrSubsampleRatio440:
		return 1, 2
	case image.YCbCrSubsampleRatio411:
		return 4, 1
	case image.YCbCrSubsampleRatio410:
		return 4, 2
	}
	return 1, 1
}

// setImage makes a source of a decoded image; formats without planes of their own are converted
// into conv (reused).
func (s *source) setImage(im image.Image, conv *[]byte) {
	r := im.Bounds()
	w, h := r.Dx(), r.Dy()
	switch m := im.(type) {
	case *image.YCbCr:
		s.setYCbCr(m)
		return
	case *image.NYCbCrA:
		s.setYCbCr(&m.YCbCr)
		return
	case *image.Gray:
		s.setGray(m.Pix[m.PixOffset(r.Min.X, r.Min.Y):], m.Stride, w, h)
		return
	case *image.RGBA:
		s.setInterleaved(m.Pix[m.PixOffset(r.Min.X, r.Min.Y):], m.Stride, 4, w, h)
		return
	case *image.NRGBA:
		s.setInterleaved(m.Pix[m.PixOffset(r.Min.X, r.Min.Y):], m.Stride, 4, w, h)
		return
	}
	// Rare models (paletted GIF/PNG/BMP, 16-bit PNG, CMYK JPEG): convert to RGB, alpha dropped.
	*conv = growBytes(*conv, w*h*3)
	buf := *conv
	var lut [256][3]byte
	pm, paletted := im.(*image.Paletted)
	if paletted {
		for i, c := range pm.Palette {
			if i < 256 {
				n := color.NRGBAModel.Convert(c).(color.NRGBA)
				lut[i] = [3]byte{n.R, n.G, n.B}
			}
		}
	}
	i := 0
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			if paletted {
				v := lut[pm.ColorIndexAt(x, y)]
				buf[i], buf[i+1], buf[i+2] = v[0], v[1], v[2]
			} else {
				n := color.NRGBAModel.Convert(im.At(x, y)).(color.NRGBA)
				buf[i], buf[i+1], buf[i+2] = n.R, n.G, n.B
			}
			i += 3
		}
	}
	s.setInterleaved(buf, w*3, 3, w, h)
}
