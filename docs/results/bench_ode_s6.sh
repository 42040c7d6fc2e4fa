#!/bin/bash
# Session 6 (issue 14, ODE rows): run under the shared lock from the worktree root:
#   flock /work/bench.lock bash docs/results/bench_ode_s6.sh
# 1. the compiled loop against the compiled step / whole callable, eager and JAX (fresh Inductor cache)
# 2. the catalogue benchmark (eager, compiled, compile="auto" policy vs JAX) on the ODE entries
set -u
PY=.venv/bin/python
OUT=docs/results
{
  echo "# git $(git rev-parse --short HEAD), started $(date -u +%FT%TZ)"
  echo "# command: TORCHINDUCTOR_CACHE_DIR=\$(mktemp -d) python -m validation.probe_ode_compiled_loop ode_rk4_decay lotka_volterra_fit ode_linear_energy van_der_pol_stiff --rounds 15 --budget 3"
  echo "# uptime before: $(uptime)"
  TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) $PY -m validation.probe_ode_compiled_loop \
    ode_rk4_decay lotka_volterra_fit ode_linear_energy van_der_pol_stiff --rounds 15 --budget 3 2>&1 \
    | grep -v -i "warn"
  echo "# uptime after: $(uptime)"
} > $OUT/probe_ode_compiled_loop_s6.txt
{
  echo "# git $(git rev-parse --short HEAD), started $(date -u +%FT%TZ)"
  echo "# command: python -m validation.bench_torch --auto ode_rk4_decay lotka_volterra_fit ode_linear_energy ode_oscillator lotka_volterra van_der_pol lorenz63 ode_linear van_der_pol_stiff robertson --out docs/results/bench_torch_ode_s6.jsonl --rounds 10 --budget 1.5 --timeout 420"
  echo "# uptime before: $(uptime)"
  $PY -m validation.bench_torch --auto ode_rk4_decay lotka_volterra_fit ode_linear_energy \
    ode_oscillator lotka_volterra van_der_pol lorenz63 ode_linear van_der_pol_stiff robertson \
    --out $OUT/bench_torch_ode_s6.jsonl --rounds 10 --budget 1.5 --timeout 420 2>&1 | grep -v -i "warn"
  echo "# uptime after: $(uptime)"
} > $OUT/bench_torch_ode_s6.txt
