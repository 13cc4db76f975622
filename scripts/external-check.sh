#!/usr/bin/env bash
# Builds and runs, from copies outside the repository whose replace directive points at this
# checkout, what a user would copy: examples/external (its own module, with a stoke of its own,
# cmd/stoke, that trains, predicts and exports a model holding the module's layers), and every
# other program under examples/ in one module of its own, of which examples/mnist and
# examples/ddp (two ranks) train one epoch on MNIST (downloaded once by datasets.DownloadMNIST
# into the user's cache folder, as for any user). What they use must be exported (nothing in
# internal/). Exits non-zero if any of them does not build, vet or run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d /tmp/stoke-external-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export GOWORK=off

# check DIR: the module in DIR, pointed at this checkout, tidied and vetted.
check() {
  (cd "$1" &&
    go mod edit -replace "github.com/stoke-ml/stoke=$root" &&
    # Tidy the copy: a dependency added to Stoke since the go.sum was written is fetched (module
    # cache or proxy) rather than failing the check.
    go mod tidy &&
    go vet ./...)
}

mkdir "$tmp/external"
cp -r "$root/examples/external/." "$tmp/external/"
check "$tmp/external"
(cd "$tmp/external" && go build -o "$tmp/own/external" . && go build -o "$tmp/own/stoke" ./cmd/stoke)
"$tmp/own/external" >"$tmp/out.txt" 2>&1 || { cat "$tmp/out.txt"; exit 1; }
grep '^ok: ' "$tmp/out.txt"

# The module's stoke of its own (cmd/stoke: cli.Main, built with the module's package layers)
# trains, predicts and exports se-net on the image folder the example writes; the repository's
# stoke, built without those layers, refuses the checkpoint.
own() {
  "$tmp/own/stoke" "$@" >"$tmp/own.txt" 2>&1 || { echo "stoke $*:"; cat "$tmp/own.txt"; exit 1; }
}
"$tmp/own/external" -folder "$tmp/colours"
own train --model se-net --data "$tmp/colours" --size 16 --batch 16 --epochs 3 --lr 0.01 --checkpoint "$tmp/se.ck" -q
own predict --checkpoint "$tmp/se.ck" --data "$tmp/colours"
acc=$(grep '^accuracy ' "$tmp/own.txt") || { cat "$tmp/own.txt"; exit 1; }
echo "own stoke predict: $acc"
awk '{ exit !($2 + 0 >= 90) }' <<<"$acc" || { echo "own stoke predict: accuracy under 90%"; exit 1; }
own export --checkpoint "$tmp/se.ck" --data "$tmp/colours" --out "$tmp/se.onnx"
[[ -s $tmp/se.onnx ]] || { echo "own stoke export wrote no se.onnx"; exit 1; }
(cd "$root" && go build -o "$tmp/prebuilt/stoke" ./cmd/stoke)
if "$tmp/prebuilt/stoke" predict --checkpoint "$tmp/se.ck" --data "$tmp/colours" >"$tmp/prebuilt.txt" 2>&1 ||
  ! grep -qE 'unknown model "se-net"|nor registered' "$tmp/prebuilt.txt"; then
  echo "the repository's stoke did not refuse a checkpoint holding unregistered layers:"
  cat "$tmp/prebuilt.txt"
  exit 1
fi

mkdir "$tmp/examples"
for d in "$root"/examples/*/; do
  name=$(basename "$d")
  [[ -f $d/go.mod ]] && continue # a module of its own (external), checked above
  cp -r "$d" "$tmp/examples/$name"
done
(cd "$tmp/examples" && go mod init example.com/stoke-examples >/dev/null 2>&1 &&
  go mod edit -require github.com/stoke-ml/stoke@v0.0.0)
check "$tmp/examples"
(cd "$tmp/examples" && go build -o "$tmp/bin/" ./...)
"$tmp/bin/mnist" -epochs 1 >"$tmp/mnist.txt" 2>&1 || { cat "$tmp/mnist.txt"; exit 1; }
grep '^test accuracy ' "$tmp/mnist.txt"
"$tmp/bin/ddp" -epochs 1 -world 2 >"$tmp/ddp.txt" 2>&1 || { cat "$tmp/ddp.txt"; exit 1; }
grep '^2 ranks, global batch ' "$tmp/ddp.txt"
