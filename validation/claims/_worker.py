"""One fresh process measuring claims: ``python -m validation.claims._worker --claims C1,C4``.

Prints one JSON line per claim (its part, :func:`validation.claims.run_claim`);
:func:`validation.claims.measure_in_child` reads them.
"""

from __future__ import annotations

import argparse
import json


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m validation.claims._worker")
    ap.add_argument("--claims", required=True)
    ap.add_argument("--process", type=int, required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    from simdiff.backends import set_threads  # before jax is imported: XLA reads its flags once

    set_threads(args.threads)
    from validation.claims import ClaimsContext, run_claim

    ctx = ClaimsContext(quick=args.quick, process=args.process)
    for cid in args.claims.split(","):
        print(json.dumps(run_claim(cid, ctx), default=float), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
