#!/bin/bash
# Session 6: the two trajectory-VJP rows again after 03d68e9 (compiled parts keep their buffers):
#   flock /work/bench.lock bash docs/results/bench_ode_s6_vjpfix.sh
set -u
PY=.venv/bin/python
OUT=docs/results
{
  echo "# git $(git rev-parse --short HEAD), started $(date -u +%FT%TZ)"
  echo "# command: python -m validation.bench_torch --auto lotka_volterra ode_linear --out docs/results/bench_torch_ode_s6_vjpfix.jsonl --rounds 10 --budget 1.5 --timeout 420"
  echo "# uptime before: $(uptime)"
  $PY -m validation.bench_torch --auto lotka_volterra ode_linear \
    --out $OUT/bench_torch_ode_s6_vjpfix.jsonl --rounds 10 --budget 1.5 --timeout 420 2>&1 | grep -v -i "warn"
  echo "# uptime after: $(uptime)"
} > $OUT/bench_torch_ode_s6_vjpfix.txt
