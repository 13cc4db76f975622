package train

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// The builders NewModel knows beyond its own: a model zoo registers each architecture by name, as
// torchvision.models and timm do, and NewModel builds "name" or "name(key=value,...)".

// Builder builds a model of a registered architecture for images of shape in and the given number
// of classes, from the arguments of its name ("" for none; "image_size=28,patch_size=4" for
// "vit(image_size=28,patch_size=4)"). The model's Name must be the name it was built from, with
// its arguments written so that building from that name again gives the same model: a
// checkpoint records it and CheckpointModel rebuilds the model from it. A builder makes the model
// with Net from its module.
type Builder func(args string, in Shape, classes int) (*Model, error)

var (
	buildersMu sync.RWMutex
	builders   = map[string]Builder{}
)

// RegisterModel makes NewModel (and so stoke train --model, predict, export and CheckpointModel)
// build name with build. Register in an init function; it is safe for concurrent use.
func RegisterModel(name string, build Builder) error {
	if name == "" || strings.ContainsAny(name, " (),=:") || build == nil {
		return fmt.Errorf("train: RegisterModel %q: a name is one word and build is not nil", name)
	}
	buildersMu.Lock()
	defer buildersMu.Unlock()
	if _, dup := builders[name]; dup || slices.Contains(builtinModels, name) {
		return fmt.Errorf("train: %w: model %q", ErrRegistered, name)
	}
	builders[name] = build
	return nil
}

// registeredModel builds spec ("name" or "name(args)") with its registered builder; ok is false
// when no builder has that name.
func registeredModel(spec string, in Shape, classes int) (m *Model, ok bool, err error) {
	name, args := spec, ""
	if i := strings.IndexByte(spec, '('); i >= 0 {
		if !strings.HasSuffix(spec, ")") {
			return nil, true, fmt.Errorf("train: %w: model %q: unbalanced parentheses", ErrModel, spec)
		}
		name, args = spec[:i], spec[i+1:len(spec)-1]
	}
	buildersMu.RLock()
	build := builders[name]
	buildersMu.RUnlock()
	if build == nil {
		return nil, false, nil
	}
	m, err = build(args, in, classes)
	if err != nil {
		return nil, true, fmt.Errorf("train: %w: model %q: %w", ErrModel, spec, err)
	}
	return m, true, nil
}

// nameRegistry holds what a model zoo registers by model name beside the builders (recipes,
// evaluation transforms); it is safe for concurrent use.
type nameRegistry[T any] struct {
	mu sync.RWMutex
	m  map[string]T
}

// register makes v the value of names, or of none when one of them has a value already or is a
// built-in model's; what names the value in the error.
func (r *nameRegistry[T]) register(what string, v T, names []string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, name := range names {
		if _, dup := r.m[name]; dup || slices.Contains(builtinModels, name) {
			return fmt.Errorf("train: %w: %s of %q", ErrRegistered, what, name)
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
	name, _, _ := strings.Cut(model, "(")
	r.mu.RLock()
	defer r.mu.RUnlock()
	v, ok := r.m[name]
	return v, ok
}

// DecodeArgs decodes a registered builder's arguments into the struct dst points to, so that a
// builder needs no parser of its own: args is what the model's name holds between its
// parentheses, "key=value,..." (stoke train --model "tiny-transformer(heads=4,width=32)") or a
// JSON object. Each key is a field's json name; each value a JSON number, true or false, or a
// string, quoted or a bare word. A field not given keeps the value dst holds (the builder's
// default). An unknown key, a repeated one, or a value of another type than its field's is an
// error naming the key.
func DecodeArgs(args string, dst any) error {
	args = strings.TrimSpace(args)
	if args == "" {
		return nil
	}
	obj := []byte(args)
	if !strings.HasPrefix(args, "{") {
		fields := map[string]json.RawMessage{}
		for _, kv := range strings.Split(args, ",") {
			k, v, ok := strings.Cut(kv, "=")
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			if !ok || k == "" {
				return fmt.Errorf("argument %q: want key=value", strings.TrimSpace(kv))
			}
			if _, dup := fields[k]; dup {
				return fmt.Errorf("argument %s given twice", k)
			}
			raw := json.RawMessage(v)
			if !json.Valid(raw) { // a bare word: a string
				raw, _ = json.Marshal(v)
			}
			fields[k] = raw
		}
		obj, _ = json.Marshal(fields)
	}
	dec := json.NewDecoder(bytes.NewReader(obj))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return fmt.Errorf("arguments %q: %w", args, err)
	}
	if dec.More() {
		return fmt.Errorf("arguments %q: more than one JSON object", args)
	}
	return nil
}
