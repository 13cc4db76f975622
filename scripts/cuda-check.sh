#!/usr/bin/env bash
# cuda-check.sh: compiles Stoke's `cuda` build on a machine with no GPU and no CUDA toolkit.
#
#   usage: scripts/cuda-check.sh [--fetch | --bin OUT] [12|13 ...]   (default: both header sets)
#          --fetch   only fetches the headers and NVRTC (scripts/cuda-sim.sh uses it)
#          --bin OUT only builds the stoke binary with -tags cuda into OUT (`make cuda-bin`), against
#                    the headers of the one version given (default 13), and checks that it links no
#                    CUDA library: it loads them at run time (internal/cudainc/stoke_dl.h), so it
#                    starts on any host and --device cpu works there
#   env:   CUDA_CHECK_DIR   where headers, stubs and NVRTC live (default /tmp/stoke-cuda-check;
#                           never inside the repository). Delete it to fetch afresh.
#          CUDA_CHECK_PKGS  the packages to check (default ./...), e.g. "./gpu/... ./kernels/..."
#                           while other packages of a shared tree are half edited.
#
# For each CUDA major version it
#   1. fetches NVIDIA's public header wheels from PyPI (pip download, pinned versions), keeps only
#      their include/ trees and libnvrtc, and deletes the wheels (cuBLAS wheels are 400-600 MB each
#      and we need 2 of their headers); later runs reuse $CUDA_CHECK_DIR and download nothing;
#      NCCL's nccl.h and libnccl.so.2 come from the nvidia-nccl wheel of the same CUDA major, kept in
#      $CUDA_CHECK_DIR/nccl$V (include/nccl.h, lib/libnccl.so.2: the library a GPU host links);
#   2. makes empty libcuda.so / libnvrtc.so so that gorgonia.org/cu's -lcuda and -lnvrtc resolve:
#      the binaries define every CUDA function they call themselves, as trampolines into the library
#      loaded at run time (internal/cudainc/stoke_dl.h), so the link also proves that no function
#      is missing from those tables (an undefined one fails it);
#   3. runs go vet, go build and a compile-only go test (-run '^$': the test binaries are linked and
#      started with no CUDA library loaded)
#      with -tags cuda, with internal/cudainc first on the include path (the CUDA 13 shims and the
#      deferred cuInit for gorgonia.org/cu), in a build cache of its own under $CUDA_CHECK_DIR;
#   4. checks that every NCCL function the collective/nccl package calls is defined by the real
#      libnccl.so.2 of that version (nm), since the link against the stubs ignores what is missing;
#   5. runs the tests that need NVRTC but no GPU against the real libnvrtc of that version: they
#      compile gpu/cuda/ops.cu for compute_90 exactly as the runtime does, check that every
#      kernel the op set loads is in the PTX, and exercise the on-disk PTX cache;
# Exit status: 0 all passed; 1 something failed to compile or a test failed; 3 the headers could
# not be fetched (no network), so nothing was checked.
# The CUDA tests themselves run against the CPU stand-in (scripts/cuda-sim.sh, make cuda-sim) and
# on a GPU host (scripts/gpu-check.sh).
set -euo pipefail

root=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
cd "$root"
dir=${CUDA_CHECK_DIR:-/tmp/stoke-cuda-check}
case "$(realpath -m "$dir")/" in "$root"/*) echo "cuda-check: CUDA_CHECK_DIR must be outside the repository" >&2; exit 2 ;; esac
fetch_only=0 bin=
if [[ ${1:-} == --fetch ]]; then
	fetch_only=1
	shift
elif [[ ${1:-} == --bin ]]; then
	bin=$(realpath -m "${2:?cuda-check: --bin needs the output path}")
	shift 2
	[[ $# -le 1 ]] || { echo "cuda-check: --bin builds against one CUDA version" >&2; exit 2; }
	[[ $# -eq 1 ]] || set -- 13
fi
versions=("$@")
read -r -a pkgs <<<"${CUDA_CHECK_PKGS:-./...}"
[[ ${#versions[@]} -gt 0 ]] || versions=(12 13)

# shellcheck disable=SC2034 # read as ${!list} by fetch
# Pinned so that a run today and a run next month check the same headers. CUDA 13 is pinned to
# 13.0, the toolkit on the GPU host; CUDA 12 to its last release.
wheels_12="nvidia-cuda-runtime-cu12==12.9.79 nvidia-cuda-nvrtc-cu12==12.9.86 nvidia-cublas-cu12==12.9.3.13
nvidia-cuda-cccl-cu12==12.9.27 nvidia-cuda-nvcc-cu12==12.9.86"
wheels_13="nvidia-cuda-runtime==13.0.96 nvidia-cuda-nvrtc==13.0.88 nvidia-cublas==13.0.2.14
nvidia-cuda-cccl==13.0.85 nvidia-cuda-crt==13.0.88"
# NCCL apart from the CUDA set (its own directory and .complete), so that a cache made before NCCL
# was added only fetches NCCL. The same release for both majors.
nccl_12="nvidia-nccl-cu12==2.28.9"
nccl_13="nvidia-nccl-cu13==2.28.9"

# extract WHEEL DEST: nvidia/<pkg>/include/* -> DEST/include, nvidia/<pkg>/lib/libnvrtc*.so.* -> DEST/lib.
extract() {
	python3 - "$1" "$2" <<'PY'
import os, re, shutil, sys, zipfile
wheel, dest = sys.argv[1], sys.argv[2]
pat = re.compile(r'^nvidia/(?:nccl/(include/nccl\.h|lib/libnccl\.so\.2)|(?!nccl/)[^/]+/(include/.+|lib/libnvrtc(?:-builtins)?\.so\.[^/]*))$')  # not the .alt builds
with zipfile.ZipFile(wheel) as z:
    for info in z.infolist():
        m = pat.match(info.filename)
        if not m or info.is_dir():
            continue
        out = os.path.join(dest, m.group(1) or m.group(2))
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with z.open(info) as src, open(out, 'wb') as dst:
            shutil.copyfileobj(src, dst)
PY
}

fetch() { # fetch VERSION
	fetch_set "$1" cuda "wheels_$1" && fetch_set "$1" nccl "nccl_$1"
}

fetch_set() { # fetch_set VERSION NAME LIST: the wheels of LIST into $dir/NAME$VERSION
	local v=$1 set=$dir/$2$1 list=$3 spec tmp
	[[ -f $set/.complete ]] && return 0
	rm -rf "$set" && mkdir -p "$set"
	tmp=$(mktemp -d "$dir/dl.XXXXXX")
	for spec in ${!list}; do
		python3 -m pip download --quiet --no-deps --no-cache-dir --only-binary=:all: -d "$tmp" "$spec" || return 1
		extract "$tmp"/*.whl "$set" || return 1
		rm -f "$tmp"/*.whl
	done
	rmdir "$tmp"
	touch "$set/.complete"
}

stubs() {
	mkdir -p "$dir/stubs"
	local l
	for l in cuda nvrtc; do
		[[ -f $dir/stubs/lib$l.so ]] || gcc -shared -o "$dir/stubs/lib$l.so" -x c /dev/null
	done
}

# cgo_env VERSION: the environment of a cuda build against that version's headers.
cgo_env() {
	export CGO_ENABLED=1
	export CGO_CFLAGS="-I$root/internal/cudainc -I$dir/cuda$1/include -I$dir/nccl$1/include"
	export CGO_LDFLAGS="-L$dir/stubs"
	export LD_LIBRARY_PATH="$dir/stubs"
}

# no_cuda_needed BIN: BIN names no CUDA library among the libraries the dynamic loader must find.
no_cuda_needed() {
	local needed
	needed=$(readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
	echo "   $(basename "$1") needs: $(echo $needed)"
	! grep -E '^lib(cuda|nvrtc|cublas|nccl)' <<<"$needed"
}

# nccl_symbols LIB: every NCCL function the collective/nccl package's cgo code calls is defined by LIB, the
# real libnccl.so.2: the binary loads NCCL at run time (collective/nccl/nccl_dl.c), so the link here
# would take a function that NCCL does not have.
nccl_symbols() {
	local want have missing
	want=$(grep -oh '\bnccl[A-Z][A-Za-z0-9]*(' collective/nccl/*_cuda.go | tr -d '(' | sort -u)
	have=$(nm -D --defined-only "$1" | awk '{ print $3 }' | sort -u)
	missing=$(comm -23 <(echo "$want") <(echo "$have"))
	echo "   $(wc -w <<<"$want") NCCL functions called, all in $(basename "$1")${missing:+ except: $missing}"
	[[ -n $want && -z $missing ]]
}

mkdir -p "$dir"
if ((fetch_only)); then
	for v in "${versions[@]}"; do
		fetch "$v" || { echo "cuda-check: could not fetch the CUDA $v headers from PyPI" >&2; exit 3; }
		ln -sf "$(basename "$(ls "$dir/cuda$v"/lib/libnvrtc.so.* | grep -v alt | head -1)")" "$dir/cuda$v/lib/libnvrtc.so"
	done
	exit 0
fi
stubs
# A build cache of our own: cgo does not hash included headers, so a cache that saw another
# version of internal/cudainc/cuda.h or stoke_dl.h would serve stale objects (and `go clean -cache`
# would wipe everybody's cache). It is dropped whenever they change.
export GOCACHE=$dir/gocache
wrapper=$(cat internal/cudainc/*.h | sha256sum | cut -c1-16)
if [[ $(cat "$GOCACHE/.stoke-wrapper" 2>/dev/null) != "$wrapper" ]]; then
	rm -rf "$GOCACHE" && mkdir -p "$GOCACHE" && echo "$wrapper" > "$GOCACHE/.stoke-wrapper"
fi
if [[ -n $bin ]]; then
	fetch "${versions[0]}" || { echo "cuda-check: could not fetch the CUDA ${versions[0]} headers from PyPI" >&2; exit 3; }
	cgo_env "${versions[0]}"
	echo "-- go build -tags cuda -o $bin ./cmd/stoke (CUDA ${versions[0]} headers)"
	go build -tags cuda -o "$bin" ./cmd/stoke && no_cuda_needed "$bin" || { echo "cuda-check: FAILED: the cuda binary" >&2; exit 1; }
	exit 0
fi
status=0
for v in "${versions[@]}"; do
	start=$SECONDS
	if ! fetch "$v"; then
		echo "cuda-check: could not fetch the CUDA $v headers from PyPI" >&2
		exit 3
	fi
	inc=$dir/cuda$v/include
	echo "== CUDA $v headers: $(grep -m1 '#define CUDA_VERSION' "$inc/cuda.h" | awk '{print $3}')"
	cgo_env "$v"
	run() { echo "-- $*"; "$@" || { echo "cuda-check: CUDA $v: FAILED: $*" >&2; status=1; }; }
	run go vet -tags cuda "${pkgs[@]}"
	run go build -tags cuda "${pkgs[@]}" gorgonia.org/cu gorgonia.org/cu/nvrtc
	run go test -tags cuda -count=1 -run '^$' "${pkgs[@]}"
	if [[ -d collective/nccl ]] && go list -tags cuda "${pkgs[@]}" 2>/dev/null | grep -qx 'github.com/stoke-ml/stoke/collective/nccl'; then
		run nccl_symbols "$dir/nccl$v/lib/libnccl.so.2"
	fi
	# The tests that need NVRTC but no GPU run for real, against this version's libnvrtc: they
	# compile gpu/cuda/ops.cu through the Go code path (gorgonia.org/cu/nvrtc) and check the
	# on-disk PTX cache.
	ln -sf "$(basename "$(ls "$dir/cuda$v"/lib/libnvrtc.so.* | grep -v alt | head -1)")" "$dir/cuda$v/lib/libnvrtc.so"
	LD_LIBRARY_PATH="$dir/cuda$v/lib" run go test -tags cuda -count=1 -run '^(TestSizeClass|TestPTX.*|TestNVRTCArch|TestCUDALoad.*)$' ./gpu/cuda/
	echo "== CUDA $v: $((SECONDS - start)) s"
done
exit $status
