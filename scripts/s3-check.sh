#!/usr/bin/env bash
# s3-check.sh: a real S3-compatible server on 127.0.0.1 for Stoke's s3:// tests and runs.
#
#   eval "$(scripts/s3-check.sh start)"   install the server once, start it, print the exports
#   scripts/s3-check.sh run               pack MNIST, upload it, stoke bench (cold and warm cache)
#                                         and stoke train over s3://; counts the server's GETs of
#                                         the shards: the warm runs must read the cache
#   scripts/s3-check.sh stop              stop the server started by start, remove its data
#
# Each start gets its own state folder (/tmp/stoke-ci-s3.XXXXXX, exported as STOKE_S3_STATE for run
# and stop), so that two checkouts on one machine never stop each other's server.
#
# The server is the Versity S3 Gateway (versitygw, Apache-2.0) with its posix backend, installed
# with `go install` from the Go module proxy into $STOKE_CI_BIN (default /tmp/stoke-ci-bin, outside
# the repository; about 4.5 minutes cold on 2 cores, nothing when cached). start prints the exports
# the Go tests look for (STOKE_TEST_S3_ENDPOINT, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
# AWS_REGION); run points AWS_ENDPOINT_URL_S3 at the server, as a user does for any S3-compatible
# store. Exit status 3: the server could not be installed (no module proxy); 1: anything else.
set -euo pipefail

root=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
cd "$root"
bin=${STOKE_CI_BIN:-/tmp/stoke-ci-bin}
state=${STOKE_S3_STATE:-}
version=v1.8.0

start() {
  if [[ ! -x $bin/versitygw-$version ]]; then
    mkdir -p "$bin"
    echo "s3-check: installing versitygw $version into $bin" >&2
    local t0=$SECONDS
    if ! GOBIN="$bin/tmp" go install "github.com/versity/versitygw/cmd/versitygw@$version" >&2; then
      echo "s3-check: could not install versitygw" >&2
      exit 3
    fi
    mv "$bin/tmp/versitygw" "$bin/versitygw-$version"
    echo "s3-check: installed in $((SECONDS - t0)) s" >&2
  fi
  [[ -z $state ]] || stop >/dev/null 2>&1 || true
  state=$(mktemp -d /tmp/stoke-ci-s3.XXXXXX)
  mkdir -p "$state/root" "$state/meta"
  local port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  ROOT_ACCESS_KEY=stoke-ci ROOT_SECRET_KEY=stoke-ci-secret \
    nohup "$bin/versitygw-$version" --port "127.0.0.1:$port" posix --sidecar "$state/meta" "$state/root" \
    >"$state/server.log" 2>&1 </dev/null &
  echo $! >"$state/pid"
  for _ in $(seq 100); do
    if (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "export STOKE_S3_STATE=$state STOKE_TEST_S3_ENDPOINT=http://127.0.0.1:$port AWS_ACCESS_KEY_ID=stoke-ci AWS_SECRET_ACCESS_KEY=stoke-ci-secret AWS_REGION=us-east-1"
      return
    fi
    sleep 0.1
  done
  echo "s3-check: the server did not start:" >&2
  cat "$state/server.log" >&2
  exit 1
}

stop() {
  : "${state:?STOKE_S3_STATE is not set: eval the output of start first}"
  if [[ -f $state/pid ]]; then
    kill "$(cat "$state/pid")" 2>/dev/null || true
    rm -f "$state/pid"
  fi
  rm -rf "$state"
}

# shard_gets [SPLIT] counts the GETs of the uploaded shards (of SPLIT's only, if given) in the
# server's request log (stoke pack names them shard-SPLIT-NNNNNN).
shard_gets() {
  grep -c "| GET | /stoke-ci/mnist/shard-${1:+$1-}" "$state/server.log" || true
}

run() {
  : "${STOKE_TEST_S3_ENDPOINT:?run start first}" "${state:?run start first}"
  export AWS_ENDPOINT_URL_S3=$STOKE_TEST_S3_ENDPOINT
  local work=$state/work
  mkdir -p "$work"
  go build -o "$work/stoke" ./cmd/stoke
  "$work/stoke" pack --data mnist --out "$work/mnist" --format raw --compress zstd -q
  go run ./scripts/s3put "$work/mnist" s3://stoke-ci/mnist
  local spec='shards:s3://stoke-ci/mnist/shard-*.tar.zst' common=(--size 28 --workers 2 --json -q)
  local before
  for cache in cold warm; do
    echo "s3-check: stoke bench over s3://, $cache cache"
    before=$(shard_gets)
    "$work/stoke" bench --data "$spec" --cache-dir "$work/cache" --cache-size 1G "${common[@]}" | tee "$work/bench-$cache.json"
    echo "s3-check: $cache cache: $(($(shard_gets) - before)) GETs of shards"
    if [[ $cache == warm && $(shard_gets) != "$before" ]]; then
      echo "s3-check: the warm run fetched shards again instead of reading the cache" >&2
      exit 1
    fi
  done
  echo "s3-check: stoke bench over s3://, no cache (byte ranges and streams)"
  "$work/stoke" bench --data "$spec" "${common[@]}"
  echo "s3-check: stoke bench on local disk"
  "$work/stoke" bench --data "shards:$work/mnist/shard-*.tar.zst" "${common[@]}"
  # The bench read the train split; train also tests once on the test split, whose one shard it
  # fetches into the cache.
  echo "s3-check: stoke train over s3:// (index.json, through the cache the bench runs filled)"
  before=$(shard_gets train)
  local tests=$(shard_gets test)
  "$work/stoke" train --data shards:s3://stoke-ci/mnist/index.json --cache-dir "$work/cache" --cache-size 1G --size 28 --model mlp --epochs 1 --val-split 0.1 --json -q | tee "$work/train.json"
  if [[ $(shard_gets train) != "$before" ]]; then
    echo "s3-check: stoke train fetched $(($(shard_gets train) - before)) train shards instead of reading --cache-dir" >&2
    exit 1
  fi
  if [[ $(($(shard_gets test) - tests)) != 1 ]]; then
    echo "s3-check: stoke train fetched the test split's shard $(($(shard_gets test) - tests)) times; want once, into the cache" >&2
    exit 1
  fi
  python3 - "$work/bench-cold.json" "$work/train.json" <<'PY'
import json, sys
bench = json.loads(open(sys.argv[1]).read().splitlines()[-1])
assert bench["images"] == 60000 and bench["skipped"] == 0, bench
train = json.loads(open(sys.argv[2]).read().splitlines()[-1])
assert train["skipped"] == 0, train
# Evaluated on a held-out tenth of the train split (--val-split), then once on the test split.
assert train["test_acc"] > 0.8, train
assert train["final_test"]["split"] == "test" and train["final_test"]["samples"] == 10000, train
assert train["final_test"]["accuracy"] > 0.8, train
print("s3-check: ok: %d images over s3:// (cold cache), train accuracy %.4f" % (bench["images"], train["test_acc"]))
PY
}

case ${1:-} in
  start | stop | run) "$1" ;;
  *) echo "usage: scripts/s3-check.sh start|run|stop" >&2; exit 2 ;;
esac
