#!/bin/sh
# before tree: git archive 2933bbb | tar -x -C /tmp/i14l/before (main before the change)
cd /work/wt/issue11
echo "# started $(date -u +%FT%TZ); uptime before: $(uptime)"
echo "# before = main 2933bbb (git archive, PYTHONPATH), after = $(git rev-parse --short HEAD); each in a fresh TORCHINDUCTOR_CACHE_DIR"
for round in 1 2; do
  for which in before after; do
    if [ $which = before ]; then root=/tmp/i14l/before; else root=/work/wt/issue11; fi
    echo "## round $round: $which"
    (cd $root && TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) PYTHONPATH=$root timeout 500 /work/wt/issue11/.venv/bin/python -m validation.bench_ode_compile --repeats 7 2>&1 | grep -v -i warn | grep -E "first|steady|ratio|max rel|C\+\+ compiler|Inductor codegen|Dynamo after grad")
  done
done
echo "# uptime after: $(uptime); finished $(date -u +%FT%TZ)"
