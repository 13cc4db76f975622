# Generates idct_amd64.s (go generate, from this directory): the 8x8 IDCT of dct.go (idctRows then
# idctColsStore) in AVX2, op for op, with registers allocated here. TestIDCTSIMDMatchesGo checks
# the result against the Go code; change both together.
#
# The sparse variant (idctAVX2T4) is the same program for a block whose coefficients outside the
# top-left 4x4 are zero: a variable known to be all zeros is ZERO instead of a register, and the
# operations on it fold (0 shifted or multiplied is 0, x+0 and x-0 are x), so it leaves out the
# instructions whose result the integer arithmetic already knows. Its output is the full
# program's exactly.
consts = {}
def const(v):
    name = f"k{len(consts)}" if v not in consts else consts[v]
    consts.setdefault(v, name)
    return f"idctK<>+{32*list(consts).index(v)}(SB)"

def box(kcos, ksin):
    return kcos, ksin - kcos, kcos + ksin

out = []
def emit(s): out.append("\t" + s)

ZERO = "ZERO"  # a variable whose every lane is 0, held in no register

class RA:
    def __init__(self):
        self.free = [f"Y{i}" for i in range(16)]
        self.var = {}
    def new(self):
        return self.free.pop(0)
    def release(self, r):
        if r != ZERO and r not in self.var.values() and r not in self.free:
            self.free.append(r)
    def assign(self, mapping):  # mapping var -> reg (new values)
        old = [self.var.get(v) for v in mapping]
        self.var.update(mapping)
        for r in old:
            if r is not None:
                self.release(r)

ra = RA()
def R(v):
    assert ra.var[v] != ZERO, v
    return ra.var[v]

def isz(v): return ra.var[v] == ZERO

def copy(v):  # a new register holding v's value
    d = ra.new()
    emit(f"VMOVDQA {R(v)}, {d}")
    return d

def binop(op, a, b):  # returns new reg = a op b (op on Intel order dst=a op b)
    d = ra.new()
    emit(f"{op} {R(b)}, {R(a)}, {d}")
    return d

def bfly(a, b, comment=None):  # a, b = a+b, a-b
    if isz(b):  # a, b = a, a (or both stay 0)
        if not isz(a):
            ra.assign({b: copy(a)})
        return
    assert not isz(a), "0-b needs a zero register"
    s = binop("VPADDD", a, b)
    t = binop("VPSUBD", a, b)
    ra.assign({a: s, b: t})

def shl(v, n):
    if isz(v): return
    emit(f"VPSLLD ${n}, {R(v)}, {R(v)}")

def sar(v, n):
    if isz(v): return
    emit(f"VPSRAD ${n}, {R(v)}, {R(v)}")

def mulc(v, k):
    if isz(v): return
    emit(f"VPMULLD {const(k)}, {R(v)}, {R(v)}")

def addc(v, k):
    if isz(v):
        d = ra.new()
        emit(f"VMOVDQU {const(k)}, {d}")
        ra.var[v] = d
        return
    emit(f"VPADDD {const(k)}, {R(v)}, {R(v)}")

def dctbox(x0, x1, kcos, ksin):
    K, A, B = box(kcos, ksin)
    # y0 = (x0+x1)*K + A*x1, y1 = (x0+x1)*K - B*x0; a ZERO input drops its terms.
    if isz(x0) and isz(x1):
        return
    if isz(x0) or isz(x1):
        v, k2, op = (x0, B, "VPSUBD") if isz(x1) else (x1, A, "VPADDD")  # the input that is not 0
        s = ra.new()
        emit(f"VPMULLD {const(K)}, {R(v)}, {s}")
        y = ra.new()
        emit(f"VPMULLD {const(k2)}, {R(v)}, {y}")
        emit(f"{op} {y}, {s}, {y}")  # y1 = s - B*x0, or y0 = s + A*x1 (VPADDD order as the full box)
        ra.assign({x0: s, x1: y} if isz(x1) else {x0: y, x1: s})
        return
    s = ra.new()
    emit(f"VPADDD {R(x1)}, {R(x0)}, {s}")
    emit(f"VPMULLD {const(K)}, {s}, {s}")
    y0 = ra.new()
    emit(f"VPMULLD {const(A)}, {R(x1)}, {y0}")
    emit(f"VPADDD {s}, {y0}, {y0}")
    y1 = ra.new()
    emit(f"VPMULLD {const(B)}, {R(x0)}, {y1}")
    emit(f"VPSUBD {y1}, {s}, {y1}")
    ra.free.append(s)
    ra.assign({x0: y0, x1: y1})

def transpose(names, upper_zero=False):  # names: 8 vars holding rows; afterwards names[k] holds column k
    # upper_zero: lanes 4-7 of every row are 0, so columns 4-7 are ZERO.
    r = [R(n) for n in names]
    t = []
    for i in range(0, 8, 2):
        lo, hi = ra.new(), ra.new()
        emit(f"VPUNPCKLDQ {r[i+1]}, {r[i]}, {lo}")
        emit(f"VPUNPCKHDQ {r[i+1]}, {r[i]}, {hi}")
        t += [lo, hi]
    for n in names:
        ra.free.append(ra.var.pop(n))
    # t = [t0 t1 t2 t3 t4 t5 t6 t7] as in the comment: t0,t1 from r0,r1 ...
    u = [None]*8
    for base in (0, 4):
        a0, a1, b0, b1 = t[base], t[base+1], t[base+2], t[base+3]
        for j, (op, x, y) in enumerate([("VPUNPCKLQDQ", a0, b0), ("VPUNPCKHQDQ", a0, b0), ("VPUNPCKLQDQ", a1, b1), ("VPUNPCKHQDQ", a1, b1)]):
            d = ra.new()
            emit(f"{op} {y}, {x}, {d}")
            u[base+j] = d
        for x in (a0, a1, b0, b1):
            ra.free.append(x)
    cols = {}
    for k in range(4):
        lo = ra.new()
        emit(f"VPERM2I128 $0x20, {u[k+4]}, {u[k]}, {lo}")
        hi = ZERO
        if not upper_zero:
            hi = ra.new()
            emit(f"VPERM2I128 $0x31, {u[k+4]}, {u[k]}, {hi}")
        cols[names[k]], cols[names[k+4]] = lo, hi
    for x in u:
        ra.free.append(x)
    ra.var.update(cols)

def generate(transposed, sparse=False):
    global ra, out
    ra, out = RA(), []
    # Load the 8 rows.
    rows = [f"r{i}" for i in range(8)]
    if transposed:
        emit("// rows of the transposed block: register k holds coefficient k of every row")
    else:
        emit("// rows of the block")
    for i, n in enumerate(rows):
        if sparse and i >= 4:  # coefficients 4-7 of every row are 0
            ra.var[n] = ZERO
            continue
        d = ra.new()
        emit(f"VMOVDQU {32*i}(SI), {d}")
        ra.var[n] = d
    if not transposed:
        emit("// transpose: register k holds coefficient k of every row")
        transpose(rows)
    # Row pass: x0 = coef0, x7 = coef1, x2 = coef2, x5 = coef3, x1 = coef4, x6 = coef5, x3 = coef6, x4 = coef7.
    perm = ["x0", "x7", "x2", "x5", "x1", "x6", "x3", "x4"]
    ra.var = {perm[i]: ra.var[rows[i]] for i in range(8)}
    emit("// idctRows")
    shl("x0", 17); shl("x1", 17)
    bfly("x0", "x1")
    dctbox("x2", "x3", 70936, -171254)
    bfly("x1", "x2"); bfly("x0", "x3")
    shl("x4", 7); shl("x7", 7)
    bfly("x7", "x4")
    mulc("x6", 181); mulc("x5", 181)
    bfly("x7", "x5"); bfly("x4", "x6")
    for v in ("x4", "x7", "x5", "x6"): sar(v, 2)
    dctbox("x4", "x7", 3406, -2276)
    dctbox("x5", "x6", 4017, -799)
    bfly("x0", "x7"); bfly("x1", "x6"); bfly("x2", "x5"); bfly("x3", "x4")
    # Outputs: x[k] is output element k of each row (lane = row): transpose back to rows.
    outs = [f"x{k}" for k in range(8)]
    emit("// transpose back: register r holds row r")
    transpose(outs, upper_zero=sparse)  # sparse: rows 4-7 of the block are 0, so are their outputs
    # Col pass: register r = row r; x0 = row0, x7 = row1, x2 = row2, x5 = row3, x1 = row4, x6 = row5, x3 = row6, x4 = row7
    ra.var = {perm[i]: ra.var[outs[i]] for i in range(8)}
    emit("// idctColsStore")
    addc("x0", 1 << 19)
    bfly("x0", "x1"); sar("x0", 2); sar("x1", 2)
    sar("x2", 13); sar("x3", 13)
    dctbox("x2", "x3", 1108, -2676)
    bfly("x1", "x2"); bfly("x0", "x3")
    bfly("x7", "x4")
    sar("x5", 13); mulc("x5", 11585)
    sar("x6", 13); mulc("x6", 11585)
    bfly("x7", "x5"); bfly("x4", "x6")
    for v in ("x4", "x7", "x5", "x6"): sar(v, 14)
    dctbox("x4", "x7", 3406, -2276)
    dctbox("x5", "x6", 4017, -799)
    bfly("x0", "x7"); bfly("x1", "x6"); bfly("x2", "x5"); bfly("x3", "x4")
    emit("// level shift, clamp to bytes, store: output row r is x<r>, four rows at a time")
    for r in range(8):
        sar(f"x{r}", 18)
        addc(f"x{r}", 128)
    pidx = ra.new()
    emit(f"VMOVDQU storePerm<>(SB), {pidx}")
    for q in (0, 4):
        p01 = binop("VPACKSSDW", f"x{q+0}", f"x{q+1}")  # words: row q, q+1 (low halves | high halves)
        p23 = binop("VPACKSSDW", f"x{q+2}", f"x{q+3}")
        by = ra.new()
        emit(f"VPACKUSWB {p23}, {p01}, {by}")  # dwords: rows q..q+3 columns 0-3 | columns 4-7
        ra.free += [p01, p23]
        emit(f"VPERMD {by}, {pidx}, {by}")  # qword k = row q+k
        xb = "X" + by[1:]
        emit(f"MOVQ {xb}, (DI)")
        emit(f"VPEXTRQ $1, {xb}, (DI)(DX*1)")
        emit(f"VEXTRACTI128 $1, {by}, {xb}")
        emit(f"MOVQ {xb}, (DI)(DX*2)")
        emit(f"VPEXTRQ $1, {xb}, (DI)(R8*1)")
        if q == 0:
            emit("LEAQ (DI)(DX*4), DI")
        ra.free.append(by)
    return out

hdr = """// Code generated by idct_gen.py; DO NOT EDIT.

//go:build !noasm

#include "textflag.h"

// idctAVX2 is idctRows followed by idctColsStore (dct.go) on 8 columns or rows at once: the same
// int32 operations in the same order, so its output is identical. The rows are transposed into
// registers (one coefficient of every row per register), transformed, transposed back, and the
// column pass runs on whole rows. idctAVX2T takes the block transposed (as the sequential
// decoder stores it for this IDCT) and skips the first transpose. idctAVX2T4 is idctAVX2T for a
// block whose coefficients outside the top-left 4x4 are zero, without the operations on zeros.
"""
funcs = []
for name, transposed, sparse in (("idctAVX2", False, False), ("idctAVX2T", True, False), ("idctAVX2T4", True, True)):
    out = generate(transposed, sparse)
    funcs += [f"// func {name}(dst *byte, stride int, b *block)",
              f"TEXT ·{name}(SB), NOSPLIT, $0-24",
              "\tMOVQ dst+0(FP), DI", "\tMOVQ stride+8(FP), DX", "\tMOVQ b+16(FP), SI",
              "\tLEAQ (DX)(DX*2), R8"] + out + ["\tVZEROUPPER", "\tRET", ""]
data = []
for i, v in enumerate(consts):
    for q in range(4):
        lo = v & 0xffffffff
        data.append(f"DATA idctK<>+{32*i+8*q}(SB)/8, $0x{lo:08x}{lo:08x}")
data.append(f"GLOBL idctK<>(SB), RODATA|NOPTR, ${32*len(consts)}")
data.append("")
data.append("// storePerm gathers the dwords of each output row (VPERMD index 0, 4, 1, 5, 2, 6, 3, 7).")
for q, (a, b) in enumerate(((0, 4), (1, 5), (2, 6), (3, 7))):
    data.append(f"DATA storePerm<>+{8*q}(SB)/8, $0x{b:08x}{a:08x}")
data.append("GLOBL storePerm<>(SB), RODATA|NOPTR, $32")
print(hdr + "\n".join(data) + "\n\n" + "\n".join(funcs).rstrip("\n"))
