package pth

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"
)

// The pickle machine: the opcodes of protocols 2 to 5 that torch.save's data.pkl uses, over the
// objects a state_dict is made of. Nothing it reads can run code: a global it does not know is an
// error.

// dict is a dict or OrderedDict, its keys in insertion order, the comparable ones indexed.
type dict struct {
	keys, vals []any
	index      map[any]int
}

func (d *dict) get(key string) any {
	if d == nil {
		return nil
	}
	if i, ok := d.index[key]; ok {
		return d.vals[i]
	}
	return nil
}

func (d *dict) set(k, v any) {
	switch k.(type) {
	case string, int64, float64, bool, nil, global, *dict, *list, *tensor, *storage, *opaque:
		if d.index == nil {
			d.index = map[any]int{}
		}
		if i, ok := d.index[k]; ok {
			d.vals[i] = v
			return
		}
		d.index[k] = len(d.keys)
	}
	// A tuple key is another key each time (a state_dict has none).
	d.keys, d.vals = append(d.keys, k), append(d.vals, v)
}

// tuple is a pickled tuple.
type tuple []any

// list is a pickled list, one object however many times the memo hands it out.
type list struct{ items []any }

// opaque is an object of a class a state_dict does not hold (an argparse.Namespace beside a
// checkpoint's weights, a set): kept as inert, never called, and refused where a tensor is
// wanted.
type opaque struct{ class string }

// global is a class or function a GLOBAL names.
type global struct{ module, name string }

// mark is the MARK on the stack.
type mark struct{}

// Bounds on what a data.pkl may make the machine hold.
const (
	maxStack = 1 << 20
	maxMemo  = 1 << 22
)

type unpickler struct {
	b     []byte
	pos   int
	stack []any
	memo  map[int]any
}

var errShort = errors.New("truncated pickle")

func (u *unpickler) take(n int) ([]byte, error) {
	if n < 0 || n > len(u.b)-u.pos {
		return nil, errShort
	}
	p := u.b[u.pos : u.pos+n]
	u.pos += n
	return p, nil
}

func (u *unpickler) push(v any) error {
	if len(u.stack) >= maxStack {
		return errors.New("pickle stack too deep")
	}
	u.stack = append(u.stack, v)
	return nil
}

func (u *unpickler) pop() (any, error) {
	if len(u.stack) == 0 {
		return nil, errors.New("pickle stack underflow")
	}
	v := u.stack[len(u.stack)-1]
	u.stack = u.stack[:len(u.stack)-1]
	return v, nil
}

// popMark pops the values above the topmost MARK, and the MARK.
func (u *unpickler) popMark() ([]any, error) {
	for i := len(u.stack) - 1; i >= 0; i-- {
		if _, ok := u.stack[i].(mark); ok {
			vs := append([]any(nil), u.stack[i+1:]...)
			u.stack = u.stack[:i]
			return vs, nil
		}
	}
	return nil, errors.New("pickle MARK missing")
}

func (u *unpickler) top() (any, error) {
	if len(u.stack) == 0 {
		return nil, errors.New("pickle stack underflow")
	}
	return u.stack[len(u.stack)-1], nil
}

// run runs the pickle to its STOP and returns the object.
func (u *unpickler) run() (any, error) {
	for {
		op, err := u.take(1)
		if err != nil {
			return nil, err
		}
		switch op[0] {
		case '.': // STOP
			return u.pop()
		case 0x80: // PROTO
			if _, err = u.take(1); err != nil {
				return nil, err
			}
		case 0x95: // FRAME
			_, err = u.take(8)
		case '(': // MARK
			err = u.push(mark{})
		case ')': // EMPTY_TUPLE
			err = u.push(tuple{})
		case ']': // EMPTY_LIST
			err = u.push(&list{})
		case '}': // EMPTY_DICT
			err = u.push(&dict{})
		case 'N':
			err = u.push(nil)
		case 0x88, 0x89: // NEWTRUE, NEWFALSE
			err = u.push(op[0] == 0x88)
		case 'K': // BININT1
			var b []byte
			if b, err = u.take(1); err == nil {
				err = u.push(int64(b[0]))
			}
		case 'M': // BININT2
			var b []byte
			if b, err = u.take(2); err == nil {
				err = u.push(int64(binary.LittleEndian.Uint16(b)))
			}
		case 'J': // BININT
			var b []byte
			if b, err = u.take(4); err == nil {
				err = u.push(int64(int32(binary.LittleEndian.Uint32(b))))
			}
		case 0x8a: // LONG1
			err = u.long()
		case 'G': // BINFLOAT
			var b []byte
			if b, err = u.take(8); err == nil {
				err = u.push(math.Float64frombits(binary.BigEndian.Uint64(b)))
			}
		case 'X', 0x8c, 0x8d: // BINUNICODE, SHORT_BINUNICODE, BINUNICODE8
			err = u.unicode(op[0])
		case 'C', 'B': // SHORT_BINBYTES, BINBYTES
			err = u.bytes(op[0])
		case 'c': // GLOBAL "module\nname\n"
			err = u.global()
		case 0x93: // STACK_GLOBAL
			var name, module any
			if name, err = u.pop(); err == nil {
				if module, err = u.pop(); err == nil {
					m, ok1 := module.(string)
					n, ok2 := name.(string)
					if !ok1 || !ok2 {
						return nil, errors.New("STACK_GLOBAL of non-strings")
					}
					err = u.push(global{m, n})
				}
			}
		case 'q', 'r', 0x94: // BINPUT, LONG_BINPUT, MEMOIZE
			err = u.put(op[0])
		case 'h', 'j': // BINGET, LONG_BINGET
			err = u.get(op[0])
		case 't', 0x85, 0x86, 0x87: // TUPLE, TUPLE1, TUPLE2, TUPLE3
			err = u.tuple(op[0])
		case 'a': // APPEND
			var v any
			if v, err = u.pop(); err == nil {
				err = u.appendTo([]any{v})
			}
		case 'e': // APPENDS
			var vs []any
			if vs, err = u.popMark(); err == nil {
				err = u.appendTo(vs)
			}
		case 's': // SETITEM
			var k, v any
			if v, err = u.pop(); err == nil {
				if k, err = u.pop(); err == nil {
					err = u.setItems([]any{k, v})
				}
			}
		case 'u': // SETITEMS
			var vs []any
			if vs, err = u.popMark(); err == nil {
				err = u.setItems(vs)
			}
		case 'Q': // BINPERSID
			var pid any
			if pid, err = u.pop(); err == nil {
				var s *storage
				if s, err = persistent(pid); err == nil {
					err = u.push(s)
				}
			}
		case 'R': // REDUCE
			var args, fn any
			if args, err = u.pop(); err == nil {
				if fn, err = u.pop(); err == nil {
					var v any
					if v, err = reduce(fn, args); err == nil {
						err = u.push(v)
					}
				}
			}
		case 0x81: // NEWOBJ
			var args, cls any
			if args, err = u.pop(); err == nil {
				if cls, err = u.pop(); err == nil {
					var v any
					if v, err = reduce(cls, args); err == nil {
						err = u.push(v)
					}
				}
			}
		case 'b': // BUILD: an object's state (an OrderedDict's _metadata): kept out of the state_dict
			_, err = u.pop()
		case 0x8f: // EMPTY_SET
			err = u.push(&opaque{"builtins.set"})
		case 0x90: // ADDITEMS
			_, err = u.popMark()
		case 0x91: // FROZENSET
			if _, err = u.popMark(); err == nil {
				err = u.push(&opaque{"builtins.frozenset"})
			}
		default:
			return nil, fmt.Errorf("pickle opcode 0x%02x at byte %d, which a state_dict does not use", op[0], u.pos-1)
		}
		if err != nil {
			return nil, err
		}
	}
}

func (u *unpickler) long() error {
	n, err := u.take(1)
	if err != nil {
		return err
	}
	b, err := u.take(int(n[0]))
	if err != nil {
		return err
	}
	// Little-endian two's complement.
	be := make([]byte, len(b))
	for i, c := range b {
		be[len(b)-1-i] = c
	}
	v := new(big.Int).SetBytes(be)
	if len(b) > 0 && b[len(b)-1]&0x80 != 0 {
		v.Sub(v, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
	}
	if !v.IsInt64() {
		return errors.New("pickle LONG out of range")
	}
	return u.push(v.Int64())
}

func (u *unpickler) unicode(op byte) error {
	var n int
	switch op {
	case 0x8c:
		b, err := u.take(1)
		if err != nil {
			return err
		}
		n = int(b[0])
	case 'X':
		b, err := u.take(4)
		if err != nil {
			return err
		}
		n = int(binary.LittleEndian.Uint32(b))
	default:
		b, err := u.take(8)
		if err != nil {
			return err
		}
		if v := binary.LittleEndian.Uint64(b); v > uint64(len(u.b)) {
			return errShort
		} else {
			n = int(v)
		}
	}
	s, err := u.take(n)
	if err != nil {
		return err
	}
	return u.push(string(s))
}

func (u *unpickler) bytes(op byte) error {
	var n int
	if op == 'C' {
		b, err := u.take(1)
		if err != nil {
			return err
		}
		n = int(b[0])
	} else {
		b, err := u.take(4)
		if err != nil {
			return err
		}
		n = int(binary.LittleEndian.Uint32(b))
	}
	s, err := u.take(n)
	if err != nil {
		return err
	}
	return u.push(string(s))
}

func (u *unpickler) line() (string, error) {
	for i := u.pos; i < len(u.b); i++ {
		if u.b[i] == '\n' {
			s := string(u.b[u.pos:i])
			u.pos = i + 1
			return s, nil
		}
	}
	return "", errShort
}

func (u *unpickler) global() error {
	module, err := u.line()
	if err != nil {
		return err
	}
	name, err := u.line()
	if err != nil {
		return err
	}
	return u.push(global{module, name})
}

func (u *unpickler) put(op byte) error {
	var i int
	switch op {
	case 'q':
		b, err := u.take(1)
		if err != nil {
			return err
		}
		i = int(b[0])
	case 'r':
		b, err := u.take(4)
		if err != nil {
			return err
		}
		i = int(binary.LittleEndian.Uint32(b))
	default:
		i = len(u.memo)
	}
	if len(u.memo) >= maxMemo || i < 0 || i >= maxMemo {
		return errors.New("pickle memo too large")
	}
	v, err := u.top()
	if err != nil {
		return err
	}
	u.memo[i] = v
	return nil
}

func (u *unpickler) get(op byte) error {
	var i int
	if op == 'h' {
		b, err := u.take(1)
		if err != nil {
			return err
		}
		i = int(b[0])
	} else {
		b, err := u.take(4)
		if err != nil {
			return err
		}
		i = int(binary.LittleEndian.Uint32(b))
	}
	v, ok := u.memo[i]
	if !ok {
		return fmt.Errorf("pickle memo %d not set", i)
	}
	return u.push(v)
}

func (u *unpickler) tuple(op byte) error {
	n := int(op) - 0x84 // TUPLE1..3
	if op == 't' {
		vs, err := u.popMark()
		if err != nil {
			return err
		}
		return u.push(tuple(vs))
	}
	if len(u.stack) < n {
		return errors.New("pickle stack underflow")
	}
	t := append(tuple(nil), u.stack[len(u.stack)-n:]...)
	u.stack = u.stack[:len(u.stack)-n]
	return u.push(t)
}

func (u *unpickler) appendTo(vs []any) error {
	if len(u.stack) == 0 {
		return errors.New("pickle stack underflow")
	}
	l, ok := u.stack[len(u.stack)-1].(*list)
	if !ok {
		return fmt.Errorf("APPEND to %s", describe(u.stack[len(u.stack)-1]))
	}
	if len(l.items)+len(vs) > maxStack {
		return errors.New("pickle list too long")
	}
	l.items = append(l.items, vs...)
	return nil
}

func (u *unpickler) setItems(kv []any) error {
	if len(kv)%2 != 0 {
		return errors.New("SETITEMS of an odd count")
	}
	d, err := u.top()
	if err != nil {
		return err
	}
	m, ok := d.(*dict)
	if !ok {
		return fmt.Errorf("SETITEM on %s", describe(d))
	}
	for i := 0; i < len(kv); i += 2 {
		m.set(kv[i], kv[i+1])
	}
	return nil
}

// persistent is the storage a persistent id names: ("storage", the storage type, key, location,
// numel).
func persistent(pid any) (*storage, error) {
	t, ok := pid.(tuple)
	if !ok || len(t) < 5 || t[0] != "storage" {
		return nil, fmt.Errorf("persistent id %s is not a storage", describe(pid))
	}
	g, ok1 := t[1].(global)
	key, ok2 := t[2].(string)
	numel, ok3 := t[4].(int64)
	if _, known := storageTypes[g.name]; !ok1 || !ok2 || !ok3 || g.module != "torch" || !known || numel < 0 || numel > math.MaxInt32 {
		return nil, fmt.Errorf("persistent id of a %s.%s storage, which this reader does not know (torch.FloatStorage, HalfStorage, BFloat16Storage, DoubleStorage or an integer one)", g.module, g.name)
	}
	return &storage{kind: g.name, key: key, numel: int(numel)}, nil
}

// reduce applies fn to args for the globals a state_dict is made of.
func reduce(fn, args any) (any, error) {
	g, ok := fn.(global)
	if !ok { // a call of an object an earlier call made: inert too
		return &opaque{"an object's call"}, nil
	}
	a, _ := args.(tuple)
	switch g.module + "." + g.name {
	case "collections.OrderedDict", "builtins.dict":
		return &dict{}, nil
	case "torch._utils._rebuild_tensor_v2", "torch._utils._rebuild_tensor":
		if len(a) < 4 {
			return nil, fmt.Errorf("%s of %d arguments", g.name, len(a))
		}
		s, ok1 := a[0].(*storage)
		off, ok2 := a[1].(int64)
		shape, ok3 := ints(a[2])
		stride, ok4 := ints(a[3])
		if !ok1 || !ok2 || !ok3 || !ok4 || len(shape) != len(stride) || off < 0 || off > math.MaxInt32 {
			return nil, fmt.Errorf("%s of arguments that are not a storage, an offset, a shape and a stride", g.name)
		}
		return &tensor{storage: s, offset: int(off), shape: shape, stride: stride}, nil
	case "torch._utils._rebuild_parameter":
		if len(a) < 1 {
			return nil, errors.New("_rebuild_parameter without a tensor")
		}
		if t, ok := a[0].(*tensor); ok {
			return t, nil
		}
		return nil, fmt.Errorf("_rebuild_parameter of %s", describe(a[0]))
	}
	// Another class (an argparse.Namespace, Lightning's AttributeDict, a set, bytes): inert,
	// refused only where the state_dict would hold it.
	return &opaque{g.module + "." + g.name}, nil
}

// ints is a tuple of ints (a shape, a stride).
func ints(v any) ([]int, bool) {
	t, ok := v.(tuple)
	if !ok || len(t) > 16 {
		return nil, false
	}
	out := make([]int, len(t))
	for i, x := range t {
		n, ok := x.(int64)
		if !ok || n < 0 || n > math.MaxInt32 {
			return nil, false
		}
		out[i] = int(n)
	}
	return out, true
}
