package models

import (
	"fmt"
	"math"
)

// Resample makes the position embeddings of weights trained at another image size (or patch
// size) fit this model: train.LoadWeights calls it for encoder.pos_embedding when the file's
// shape differs (see resamplePosEmbed).
func (v *VisionTransformer) Resample(name string, from []int, values []float32) ([]float32, error) {
	if name != "encoder.pos_embedding" {
		return nil, fmt.Errorf("only encoder.pos_embedding is resampled")
	}
	return resamplePosEmbed(from, values, v.Config.HiddenDim, v.Config.ImageSize/v.Config.PatchSize)
}

// resamplePosEmbed resamples position embeddings [1 1+g·g e] (the class token's, then a square
// grid's, row by row) to a grid of side×side, as timm's resample_abs_pos_embed does with bicubic
// interpolation and antialias off: the class token's embedding kept, the grid resized as
// F.interpolate(mode="bicubic", align_corners=False). The file's grid is taken to be square, as
// timm takes it when it is not told.
func resamplePosEmbed(from []int, values []float32, e, side int) ([]float32, error) {
	if len(from) != 3 || from[0] != 1 || from[2] != e || from[1] < 2 {
		return nil, fmt.Errorf("position embeddings of shape %v: want [1 1+n*n %d] (a class token and a square grid)", from, e)
	}
	g := int(math.Round(math.Sqrt(float64(from[1] - 1))))
	if g*g != from[1]-1 || len(values) != from[1]*e {
		return nil, fmt.Errorf("position embeddings of shape %v: %d grid positions are not a square grid", from, from[1]-1)
	}
	out := make([]float32, (1+side*side)*e)
	copy(out, values[:e])
	bicubic(out[e:], values[e:], g, g, e, side, side)
	return out, nil
}

// cubicA is the cubic convolution's coefficient in PyTorch's bicubic interpolation (Keys' kernel
// with a = -0.75, OpenCV's).
const cubicA = -0.75

// cubicWeights are the weights of the four source samples around a fractional offset t in [0, 1)
// (PyTorch's get_cubic_upsample_coefficients).
func cubicWeights(t float64) [4]float64 {
	near := func(x float64) float64 { return ((cubicA+2)*x-(cubicA+3))*x*x + 1 }
	far := func(x float64) float64 { return ((cubicA*x-5*cubicA)*x+8*cubicA)*x - 4*cubicA }
	return [4]float64{far(t + 1), near(t), near(1 - t), far(2 - t)}
}

// bicubicTaps are, for each of n outputs along one axis from in inputs, the four source indices
// (clamped to the edge) and their weights: align_corners=False, so output i samples input
// (i+0.5)·in/n − 0.5, not clamped at 0 (PyTorch's area_pixel_compute_source_index for cubic).
func bicubicTaps(in, n int) ([][4]int, [][4]float64) {
	idx, w := make([][4]int, n), make([][4]float64, n)
	scale := float64(float32(in) / float32(n))
	for i := range n {
		src := scale*(float64(i)+0.5) - 0.5
		f := math.Floor(src)
		w[i] = cubicWeights(src - f)
		for k := range 4 {
			idx[i][k] = min(max(int(f)-1+k, 0), in-1)
		}
	}
	return idx, w
}

// bicubic resizes src, an h×w grid of c channels (channels last), into dst, an oh×ow grid of
// them, as torch.nn.functional.interpolate(mode="bicubic", align_corners=False, antialias=False).
func bicubic(dst, src []float32, h, w, c, oh, ow int) {
	yi, yw := bicubicTaps(h, oh)
	xi, xw := bicubicTaps(w, ow)
	acc := make([]float64, c)
	for y := range oh {
		for x := range ow {
			clear(acc)
			for ky := range 4 {
				for kx := range 4 {
					wt := yw[y][ky] * xw[x][kx]
					row := src[(yi[y][ky]*w+xi[x][kx])*c:][:c]
					for ch, v := range row {
						acc[ch] += wt * float64(v)
					}
				}
			}
			out := dst[(y*ow+x)*c:][:c]
			for ch := range out {
				out[ch] = float32(acc[ch])
			}
		}
	}
}
