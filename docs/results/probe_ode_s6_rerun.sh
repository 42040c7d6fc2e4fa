#!/bin/bash
# Session 6: the loop-vs-step probe again on the final tree, quieter machine:
#   flock /work/bench.lock bash docs/results/probe_ode_s6_rerun.sh
set -u
{
  echo "# git $(git rev-parse --short HEAD), started $(date -u +%FT%TZ)"
  echo "# command: TORCHINDUCTOR_CACHE_DIR=\$(mktemp -d) python -m validation.probe_ode_compiled_loop ode_rk4_decay lotka_volterra_fit ode_linear_energy lotka_volterra --rounds 15 --budget 3"
  echo "# uptime before: $(uptime)"
  TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) .venv/bin/python -m validation.probe_ode_compiled_loop \
    ode_rk4_decay lotka_volterra_fit ode_linear_energy lotka_volterra --rounds 15 --budget 3 2>&1 | grep -v -i "warn"
  echo "# uptime after: $(uptime)"
} > docs/results/probe_ode_compiled_loop_s6b.txt
