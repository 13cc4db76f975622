package models

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// arg is one keyword argument of a builder: an int or a float, with its default. A float is in
// [0, hi); hi 0 means 1 (a probability).
type arg struct {
	name     string
	i        *int
	f        *float64
	hi       float64
	required bool
	set      bool
}

// maxArg bounds an integer argument (a size, a width, a count of layers) as train bounds each
// size of a model it rebuilds from a description (1<<15): a name from a checkpoint or a flag
// cannot ask for sizes whose products overflow.
const maxArg = 1 << 15

// parseArgs sets the arguments named in s ("a=1,b=0.5") and checks that each required one is
// given; an unknown or repeated name, or a value that is not a number, is an error naming it.
func parseArgs(s string, args []*arg) error {
	if strings.TrimSpace(s) != "" {
		for _, kv := range strings.Split(s, ",") {
			k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			i := slices.IndexFunc(args, func(a *arg) bool { return a.name == k })
			if !ok || i < 0 {
				return fmt.Errorf("argument %q: want one of %s, as name=value", kv, names(args))
			}
			a := args[i]
			if a.set {
				return fmt.Errorf("argument %s given twice", k)
			}
			a.set = true
			if a.i != nil {
				n, err := strconv.Atoi(v)
				if err != nil || n < 0 || n > maxArg {
					return fmt.Errorf("argument %s=%s: want an integer from 0 to %d", k, v, maxArg)
				}
				*a.i = n
			} else {
				hi := a.hi
				if hi == 0 {
					hi = 1
				}
				f, err := strconv.ParseFloat(v, 64)
				if err != nil || math.IsNaN(f) || f < 0 || f >= hi {
					return fmt.Errorf("argument %s=%s: want a number in [0, %g)", k, v, hi)
				}
				*a.f = f
			}
		}
	}
	for _, a := range args {
		if a.required && !a.set {
			return fmt.Errorf("argument %s is required (%s)", a.name, names(args))
		}
	}
	return nil
}

func names(args []*arg) string {
	var s []string
	for _, a := range args {
		s = append(s, a.name)
	}
	return strings.Join(s, ", ")
}

// spec writes name with the arguments that were given, in the builder's order: the model's
// name, from which the same model is built again.
func spec(name string, args []*arg) string {
	var s []string
	for _, a := range args {
		if !a.set {
			continue
		}
		if a.i != nil {
			s = append(s, fmt.Sprintf("%s=%d", a.name, *a.i))
		} else {
			s = append(s, a.name+"="+strconv.FormatFloat(*a.f, 'g', -1, 64))
		}
	}
	if len(s) == 0 {
		return name
	}
	return name + "(" + strings.Join(s, ",") + ")"
}
