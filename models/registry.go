package models

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/stoke-ml/stoke/nn"
	"github.com/stoke-ml/stoke/transforms"
)

// Shape is the shape of one input image: channels, height, width.
type Shape = transforms.Shape

// Model is a module a Builder made, with the name it was made from.
type Model struct {
	// Name is the model's name with the arguments it was given, written so that building from
	// it again gives the same model ("vit(image_size=28,patch_size=4)"): a checkpoint records it.
	Name string
	// Module takes a batch of images [N C H W] and returns logits [N classes].
	Module nn.Module
}

// Builder builds a model of a registered architecture for images of shape in and the given number
// of classes, from the arguments of its name ("" for none; "image_size=28,patch_size=4" for
// "vit(image_size=28,patch_size=4)"; DecodeArgs reads them into a struct).
type Builder func(args string, in Shape, classes int) (*Model, error)

var (
	// ErrUnknown: no builder of that name is registered.
	ErrUnknown = errors.New("unknown model")
	// ErrRegistered: Register, RegisterRecipe or RegisterEvalTransform was given a name that is
	// taken.
	ErrRegistered = errors.New("name already registered")
)

var builders nameRegistry[Builder]

// Register makes New (and so train.NewModel, stoke train --model, predict, export and
// train.CheckpointModel) build name with build, as timm's register_model does. Register in an
// init function; it is safe for concurrent use.
func Register(name string, build Builder) error {
	if name == "" || strings.ContainsAny(name, " (),=:") || build == nil {
		return fmt.Errorf("models: Register %q: a name is one word and build is not nil", name)
	}
	return builders.register("builder", build, []string{name})
}

// New builds the model spec names, "name" or "name(key=value,...)" (timm's create_model(name,
// **kwargs)), for images of shape in and the given number of classes. Spaces around the name are
// not part of it. An unknown name gives an error wrapping ErrUnknown that lists the names.
func New(spec string, in Shape, classes int) (*Model, error) {
	spec = strings.TrimSpace(spec)
	name, args := spec, ""
	if i := strings.IndexByte(spec, '('); i >= 0 {
		if !strings.HasSuffix(spec, ")") {
			return nil, fmt.Errorf("model %q: unbalanced parentheses", spec)
		}
		name, args = spec[:i], spec[i+1:len(spec)-1]
	}
	build, ok := builders.lookup(name)
	if !ok {
		return nil, fmt.Errorf("%w %q (have %s)", ErrUnknown, name, strings.Join(Names(), ", "))
	}
	m, err := build(args, in, classes)
	if err != nil {
		return nil, fmt.Errorf("model %q: %w", spec, err)
	}
	return m, nil
}

// Names lists the registered models' names, sorted.
func Names() []string {
	builders.mu.RLock()
	defer builders.mu.RUnlock()
	names := make([]string, 0, len(builders.m))
	for n := range builders.m {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// nameRegistry holds what is registered by model name (builders, recipes, evaluation
// transforms); it is safe for concurrent use.
type nameRegistry[T any] struct {
	mu sync.RWMutex
	m  map[string]T
}

// register makes v the value of names, or of none when one of them has a value already; what
// names the value in the error.
func (r *nameRegistry[T]) register(what string, v T, names []string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, name := range names {
		if _, dup := r.m[name]; dup {
			return fmt.Errorf("models: %w: %s of %q", ErrRegistered, what, name)
		}
	}
	if r.m == nil {
		r.m = map[string]T{}
	}
	for _, name := range names {
		r.m[name] = v
	}
	return nil
}

// lookup returns the value registered for model's name (model is "name" or "name(args)").
func (r *nameRegistry[T]) lookup(model string) (T, bool) {
	name, _, _ := strings.Cut(strings.TrimSpace(model), "(")
	r.mu.RLock()
	defer r.mu.RUnlock()
	v, ok := r.m[name]
	return v, ok
}

// DecodeArgs decodes a builder's arguments into the struct dst points to, so that a builder needs
// no parser of its own: args is what the model's name holds between its parentheses,
// "key=value,..." (stoke train --model "tiny-transformer(heads=4,width=32)") or a JSON object.
// Each key is a field's json name; each value a JSON number, true or false, or a string, quoted
// or a bare word. A field not given keeps the value dst holds (the builder's default). An unknown
// key, a repeated one, or a value of another type than its field's is an error naming the key.
func DecodeArgs(args string, dst any) error {
	args = strings.TrimSpace(args)
	if args == "" {
		return nil
	}
	fields := map[string]json.RawMessage{}
	seen := map[string]bool{} // keys in lower case: encoding/json matches field names regardless of case
	add := func(k string, v json.RawMessage) error {
		if seen[strings.ToLower(k)] {
			return fmt.Errorf("argument %s given twice", k)
		}
		if string(v) == "null" {
			return fmt.Errorf("argument %s: null; leave it out for the default", k)
		}
		seen[strings.ToLower(k)] = true
		fields[k] = v
		return nil
	}
	if strings.HasPrefix(args, "{") {
		dec := json.NewDecoder(strings.NewReader(args))
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			return fmt.Errorf("arguments %q: not a JSON object", args)
		}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return fmt.Errorf("arguments %q: %w", args, err)
			}
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				return fmt.Errorf("arguments %q: %w", args, err)
			}
			if err := add(tok.(string), v); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil { // the closing brace
			return fmt.Errorf("arguments %q: %w", args, err)
		}
		if _, err := dec.Token(); err != io.EOF {
			return fmt.Errorf("arguments %q: more after the JSON object", args)
		}
	} else {
		for _, kv := range strings.Split(args, ",") {
			k, v, ok := strings.Cut(kv, "=")
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			if !ok || k == "" {
				return fmt.Errorf("argument %q: want key=value", strings.TrimSpace(kv))
			}
			raw := json.RawMessage(v)
			if !json.Valid(raw) { // a bare word: a string
				raw, _ = json.Marshal(v)
			}
			if err := add(k, raw); err != nil {
				return err
			}
		}
	}
	obj, _ := json.Marshal(fields)
	dec := json.NewDecoder(bytes.NewReader(obj))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return fmt.Errorf("arguments %q: %w", args, err)
	}
	return nil
}
