#!/usr/bin/env bash
# The committed run of docs/how-to/benchmark-a-deployment.md: `servestack bench --url` against
# `servestack serve --local --engine vllm` (vLLM's CPU build, real Ray Serve and HAProxy),
# reached only through its HTTP address, then `servestack calibrate` from it. Writes
# results/measure/local-url/: bench.json and bench.png (the bench's), calibration.yaml (the
# record calibrate wrote, made in a scratch copy so the stack's own plans stay uncalibrated),
# and machine.txt (the load before the run: a busy machine makes every figure slower).
#
#     scripts/measure_local_url.sh [PATH-TO-SERVESTACK]   # default: .venv/bin/servestack
set -euo pipefail
cd "$(dirname "$0")/.."
servestack=$(realpath "${1:-.venv/bin/servestack}")
out=results/measure/local-url
port=${PORT:-18431}
mkdir -p "$out"
{ date -u +%FT%TZ; uptime; nproc; } > "$out/machine.txt"

log=$(mktemp)
"$servestack" serve --local dev --model llama-3.1-8b --engine vllm --port "$port" >"$log" 2>&1 &
serve=$!
trap 'kill -INT $serve 2>/dev/null; wait $serve || true; rm -f "$log"' EXIT
until grep -q "is serving the OpenAI API" "$log"; do
  kill -0 $serve 2>/dev/null || { cat "$log" >&2; exit 1; }
  sleep 2
done

"$servestack" bench dev --url "http://127.0.0.1:$port" --model llama-3.1-8b --out "$out" \
  --workload multi-prompt --requests 25 --repeats 2 --concurrency 4 --prefixes 2 \
  --prefix-tokens 300

# In a scratch copy, the run at the same relative path: the record names it as the repo does.
scratch=$(mktemp -d)
cp -r Pulumi.yaml stacks "$scratch/"
mkdir -p "$scratch/$out" && cp "$out/bench.json" "$scratch/$out/"
(cd "$scratch" && "$servestack" calibrate "$out/bench.json" --stack dev)
cp "$scratch/stacks/calibrations/llama-3.1-8b.yaml" "$out/calibration.yaml"
rm -rf "$scratch"
