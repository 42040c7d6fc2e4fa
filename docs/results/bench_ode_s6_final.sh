#!/bin/bash
# Session 6, final tree (Dopri5 and FixedStep compile their loop): run under the shared lock:
#   flock /work/bench.lock bash docs/results/bench_ode_s6_final.sh
set -u
{
  echo "# git $(git rev-parse --short HEAD), started $(date -u +%FT%TZ)"
  echo "# command: python -m validation.bench_torch --auto ode_rk4_decay lotka_volterra_fit ode_linear_energy ode_oscillator lotka_volterra van_der_pol lorenz63 ode_linear van_der_pol_stiff robertson --out docs/results/bench_torch_ode_s6_final.jsonl --rounds 10 --budget 1.5 --timeout 420"
  echo "# uptime before: $(uptime)"
  .venv/bin/python -m validation.bench_torch --auto ode_rk4_decay lotka_volterra_fit ode_linear_energy \
    ode_oscillator lotka_volterra van_der_pol lorenz63 ode_linear van_der_pol_stiff robertson \
    --out docs/results/bench_torch_ode_s6_final.jsonl --rounds 10 --budget 1.5 --timeout 420 2>&1 | grep -v -i "warn"
  echo "# uptime after: $(uptime)"
} > docs/results/bench_torch_ode_s6_final.txt
