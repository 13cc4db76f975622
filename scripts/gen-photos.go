//go:build ignore

// gen-photos writes a small ImageFolder of synthetic JPEG photos (smooth colour fields with noise,
// 4:2:0, quality 90) for `stoke bench` where no real photo set is at hand (scripts/cuda-sim.sh,
// scripts/gpu-check.sh):
//
//	go run scripts/gen-photos.go OUT CLASSES PER-CLASS
package main

import (
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: go run scripts/gen-photos.go OUT CLASSES PER-CLASS")
		os.Exit(2)
	}
	classes, err1 := strconv.Atoi(os.Args[2])
	per, err2 := strconv.Atoi(os.Args[3])
	if err1 != nil || err2 != nil || classes < 1 || per < 1 {
		fmt.Fprintln(os.Stderr, "gen-photos: CLASSES and PER-CLASS must be positive integers")
		os.Exit(2)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for c := range classes {
		dir := filepath.Join(os.Args[1], fmt.Sprintf("class%02d", c))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "gen-photos:", err)
			os.Exit(1)
		}
		for i := range per {
			w, h := 320+r.IntN(160), 240+r.IntN(120)
			img := image.NewRGBA(image.Rect(0, 0, w, h))
			fx, fy, ph := 2+r.Float64()*6, 2+r.Float64()*6, r.Float64()*6
			for y := range h {
				for x := range w {
					u, v := float64(x)/float64(w), float64(y)/float64(h)
					s := math.Sin(fx*u+ph) * math.Cos(fy*v)
					img.SetRGBA(x, y, color.RGBA{
						R: uint8(128 + 100*s + float64(r.IntN(24))),
						G: uint8(40*c%256) + uint8(80*u),
						B: uint8(128 - 100*s + float64(r.IntN(24))),
						A: 255,
					})
				}
			}
			f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%04d.jpg", i)))
			if err == nil {
				err = jpeg.Encode(f, img, &jpeg.Options{Quality: 90})
				if cerr := f.Close(); err == nil {
					err = cerr
				}
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, "gen-photos:", err)
				os.Exit(1)
			}
		}
	}
}
