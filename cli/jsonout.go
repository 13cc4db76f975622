package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
)

// marshalJSON is json.Marshal for the --json output, which never fails on a figure that is not
// finite: NaN, +Inf and -Inf (a loss or logits of weights gone wrong, a rate over no time) are
// written as null, wherever they are (a field, an element of a slice, a value of a map). Values
// with only finite figures come out as json.Marshal writes them, byte for byte.
func marshalJSON(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	var unsupported *json.UnsupportedValueError
	if err == nil || !errors.As(err, &unsupported) {
		return b, err
	}
	var buf bytes.Buffer
	if err := encodeFinite(&buf, reflect.ValueOf(v)); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

var marshalerType = reflect.TypeFor[json.Marshaler]()

// encodeFinite writes v as encoding/json does (field names, omitempty, embedded structs), with
// null for each non-finite float.
func encodeFinite(buf *bytes.Buffer, v reflect.Value) error {
	if !v.IsValid() {
		buf.WriteString("null")
		return nil
	}
	if v.Type().Implements(marshalerType) && (v.Kind() != reflect.Pointer || !v.IsNil()) {
		return appendMarshal(buf, v.Interface())
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			buf.WriteString("null")
			return nil
		}
		return encodeFinite(buf, v.Elem())
	case reflect.Float32, reflect.Float64:
		if f := v.Float(); math.IsNaN(f) || math.IsInf(f, 0) {
			buf.WriteString("null")
			return nil
		}
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && (v.IsNil() || v.Type().Elem().Kind() == reflect.Uint8) {
			break // null, or base64
		}
		buf.WriteByte('[')
		for i := range v.Len() {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := encodeFinite(buf, v.Index(i)); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
		return nil
	case reflect.Map:
		if v.IsNil() || v.Type().Key().Kind() != reflect.String {
			break
		}
		keys := v.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := appendMarshal(buf, k.String()); err != nil {
				return err
			}
			buf.WriteByte(':')
			if err := encodeFinite(buf, v.MapIndex(k)); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
		return nil
	case reflect.Struct:
		buf.WriteByte('{')
		first := true
		for _, f := range jsonFields(v.Type()) {
			fv, ok := fieldByIndex(v, f.index)
			if !ok || f.omitEmpty && isEmpty(fv) {
				continue
			}
			if !first {
				buf.WriteByte(',')
			}
			first = false
			if err := appendMarshal(buf, f.name); err != nil {
				return err
			}
			buf.WriteByte(':')
			if err := encodeFinite(buf, fv); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
		return nil
	}
	return appendMarshal(buf, v.Interface())
}

func appendMarshal(buf *bytes.Buffer, v any) error {
	b, err := json.Marshal(v)
	buf.Write(b)
	return err
}

type jsonField struct {
	name      string
	index     []int
	omitEmpty bool
}

// jsonFields lists the fields encoding/json writes for struct type t, in its order: exported
// fields by their tag's name, the fields of untagged embedded structs in their place, and of
// two fields with one name the shallower (neither, at the same depth).
func jsonFields(t reflect.Type) []jsonField {
	var all []jsonField
	var walk func(t reflect.Type, index []int)
	walk = func(t reflect.Type, index []int) {
		for i := range t.NumField() {
			sf := t.Field(i)
			tag := sf.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			idx := append(slices.Clone(index), i)
			ft := sf.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if sf.Anonymous && name == "" && ft.Kind() == reflect.Struct {
				walk(ft, idx)
				continue
			}
			if !sf.IsExported() {
				continue
			}
			if name == "" {
				name = sf.Name
			}
			all = append(all, jsonField{name: name, index: idx, omitEmpty: slices.Contains(strings.Split(opts, ","), "omitempty")})
		}
	}
	walk(t, nil)
	var out []jsonField
	for _, f := range all {
		keep := true
		for _, g := range all {
			if g.name == f.name && (len(g.index) < len(f.index) || len(g.index) == len(f.index) && !slices.Equal(g.index, f.index)) {
				keep = false
			}
		}
		if keep {
			out = append(out, f)
		}
	}
	return out
}

// fieldByIndex is v.FieldByIndex that reports false at a nil embedded pointer.
func fieldByIndex(v reflect.Value, index []int) (reflect.Value, bool) {
	for i, x := range index {
		if i > 0 && v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return reflect.Value{}, false
			}
			v = v.Elem()
		}
		v = v.Field(x)
	}
	return v, true
}

// isEmpty is omitempty's test.
func isEmpty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Interface, reflect.Pointer:
		return v.IsZero()
	}
	return false
}
