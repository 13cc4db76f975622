#!/usr/bin/env bash
# Times Stoke's inference and onnxruntime's of the same torchvision architectures at 224 px, 2
# threads each, alternately (Stoke, then onnxruntime, ROUNDS times), and prints each round's
# images/s and the median of the per-round ratios (Stoke / onnxruntime): issue 43's table.
#
#   on tensors: models.BenchmarkInfer (random uint8 images in memory, normalized on the device)
#               against scripts/ort_infer.py (random float32 tensors), batch 1 and 32;
#   as a user:  with PHOTOS set (an image folder, e.g. ../shared/data/make-photoset.py's), also
#               `stoke predict --weights W --model M --data $PHOTOS` (decode, the evaluation
#               transform and the forward pass; images/s from its --json) at batch 1 and 32,
#               against the same onnxruntime figures. W is torchvision's architecture with random
#               weights, saved by PYTHON.
#
# usage: scripts/infer-compare.sh PYTHON [ROUNDS] [MODEL...]
#   PYTHON: an interpreter with torch, torchvision and onnxruntime (see ../shared/peers/README.md)
set -euo pipefail
py=$1
rounds=${2:-3}
shift $(($# >= 2 ? 2 : $#))
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(resnet18 efficientnet_b0 convnext_tiny vit_b_16)
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$root" && go test -c -o "$work/models.test" ./models && go build -o "$work/stoke" ./cmd/stoke)

# iters is how many batches a run times: about two seconds of this 2-core machine.
iters() {
	case $1/$2 in
	resnet18/1) echo 60 ;; efficientnet_b0/1) echo 120 ;; convnext_tiny/1) echo 24 ;; vit_b_16/1) echo 10 ;;
	vit_b_16/32 | convnext_tiny/32) echo 1 ;; *) echo 3 ;;
	esac
}
stoke_tensors() { # model batch
	(cd "$root/models" && GOMAXPROCS=2 "$work/models.test" -test.run '^$' -test.bench "BenchmarkInfer/$1/b$2\$" \
		-test.benchtime "$(iters "$1" "$2")x") | awk '/images\/s/ { for (i = 1; i <= NF; i++) if ($i == "images/s") print $(i-1) }'
}
stoke_predict() { # model batch
	"$work/stoke" predict --weights "$work/$1.pth" --model "$1" --data "$PHOTOS" --split train --batch "$2" --json |
		tail -1 | "$py" -c 'import json, sys; s = json.load(sys.stdin); print(round(s["samples"] / s["seconds"], 2))'
}
ort() { # model batch
	"$py" "$root/scripts/ort_infer.py" "$1" "$2" 2 "$(iters "$1" "$2")" | sed -n 's/^images_per_s=//p'
}
if [ -n "${PHOTOS:-}" ]; then
	classes=$(find "$PHOTOS" -mindepth 1 -maxdepth 1 -type d | wc -l)
	for m in "${models[@]}"; do
		"$py" -c "import torch, torchvision; torch.save(getattr(torchvision.models, '$m')(num_classes=$classes).state_dict(), '$work/$m.pth')"
	done
fi
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
printf '%-16s %-6s %-10s %-30s %-30s %s\n' model batch kind stoke onnxruntime median_ratio
for m in "${models[@]}"; do
	for b in 1 32; do
		kinds=(tensors)
		[ -n "${PHOTOS:-}" ] && kinds+=(predict)
		for kind in "${kinds[@]}"; do
			s=() o=() r=()
			for _ in $(seq "$rounds"); do
				if [ "$kind" = tensors ]; then x=$(stoke_tensors "$m" "$b"); else x=$(stoke_predict "$m" "$b"); fi
				y=$(ort "$m" "$b")
				s+=("$x") o+=("$y") r+=("$(awk -v a="$x" -v b="$y" 'BEGIN { printf "%.3f", a / b }')")
			done
			printf '%-16s %-6s %-10s %-30s %-30s %s\n' "$m" "$b" "$kind" "${s[*]}" "${o[*]}" \
				"$(printf '%s\n' "${r[@]}" | median)"
		done
	done
done
