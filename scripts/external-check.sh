#!/usr/bin/env bash
# Builds and runs examples/external, a program in its own module, from a copy outside the
# repository whose replace directive points at this checkout: what it uses must be exported
# (nothing in internal/), as for any user. Exits non-zero if it does not build, vet or run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d /tmp/stoke-external-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cp -r "$root/examples/external/." "$tmp/"
cd "$tmp"
go mod edit -replace "github.com/stoke-ml/stoke=$root"
export GOWORK=off
# Tidy the copy: a dependency added to Stoke since examples/external/go.sum was written is
# fetched (module cache or proxy) rather than failing the check.
go mod tidy
go vet ./...
go run . >"$tmp/out.txt" 2>&1 || { cat "$tmp/out.txt"; exit 1; }
grep '^ok: ' "$tmp/out.txt"
