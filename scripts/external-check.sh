#!/usr/bin/env bash
# Builds and runs, from copies outside the repository whose replace directive points at this
# checkout, what a user would copy: examples/external (its own module), and every other program
# under examples/ in one module of its own, of which examples/mnist and examples/ddp (two ranks)
# train one epoch on MNIST (downloaded once by datasets.DownloadMNIST into the user's cache
# folder, as for any user). What they use must be exported (nothing in internal/). Exits non-zero
# if any of them does not build, vet or run.
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
(cd "$tmp/external" && go run . >"$tmp/out.txt" 2>&1) || { cat "$tmp/out.txt"; exit 1; }
grep '^ok: ' "$tmp/out.txt"

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
