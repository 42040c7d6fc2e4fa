"""Leaks out of the traced computation: the guard, the framework's errors, the probe.

A problem that leaves the traced computation (``float(x)``, ``x.item()``,
``x.detach()`` on torch) gives a derivative that cannot see part of it.  The
backend's leak guard (``Backend.leak_guard``) raises at such an op; the
framework's own leak errors and warnings become :class:`~simdiff.errors.LeakError`;
the probe (:mod:`simdiff.core.probe`) compares one directional derivative
with a difference quotient on the first call where the tracer does not catch
leaks (torch).  See docs/errors.md.

The functions take the :class:`~simdiff.Derivatives` ``d`` whose call they watch.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

from simdiff.core.probe import probe
from simdiff.errors import LeakError, SimdiffError, UnsupportedError

__all__ = ["guarded", "leak", "leak_error", "leak_guard", "run_probe"]


def leak(d: Any, exc: Exception, kind: str) -> Exception:
    """``LeakError`` naming the cause if ``exc`` means a leak; ``UnsupportedError`` if it
    is the framework refusing a construct in the problem (``Backend.refusal_cause``);
    else ``exc`` itself."""
    leak = leak_error(d, exc, kind)
    if leak is not exc or isinstance(exc, SimdiffError):
        return leak
    refusal = d.backend.refusal_cause(exc)
    if refusal is None:
        return exc
    return UnsupportedError(
        f"simdiff.{kind} of problem {d.problem.name!r} on {d.backend.name}: "
        f"{refusal} ({type(exc).__name__}: {str(exc).splitlines()[0]})"
    )


def leak_error(d: Any, exc: Exception, kind: str) -> Exception:
    """``LeakError`` naming the cause if ``exc`` means a leak; else ``exc`` itself.

    The chain of causes is read too: a leak raised while ``torch.compile``
    traced or ran the callable reaches here wrapped (``UnsupportedError``
    "torch.compile failed", Dynamo's own errors).
    """
    source: BaseException | None = exc
    for _ in range(8):
        if source is None:
            return exc
        cause = d.backend.leak_cause(source)
        if cause is not None:
            break
        if isinstance(source, SimdiffError) and not isinstance(source, UnsupportedError):
            # simdiff's own verdict (a SolverError raised while an earlier failure was
            # handled, say) stands; only compile failures wrap a leak
            return exc
        source = source.__cause__ or (None if source.__suppress_context__ else source.__context__)
    else:
        return exc
    return LeakError(
        f"simdiff.{kind} of problem {d.problem.name!r} on {d.backend.name}: the "
        f"problem leaves the traced computation ({cause}), so the derivative cannot see "
        "part of it. Write it with ops: ops.where for branches, ops.stop_gradient for "
        f"values meant to be constant. ({type(source).__name__}: "
        f"{str(source).splitlines()[0]})"
    )


def leak_guard(d: Any) -> Any:
    """The backend's leak guard for this problem (its trusted packages, the strict mode)."""
    return d.backend.leak_guard(d.problem.trusted_packages, d.strict_leaks)


def guarded(d: Any, thunk: Callable[[], Any], kind: str, fn: Any = None, guard: bool = True) -> Any:
    """Run ``thunk``; the framework's leak errors and warnings become ``LeakError``.

    Under the backend's leak guard (``Backend.leak_guard``) unless the leak
    checks are off (``probe=False``) or ``guard`` is false.  Compiled
    callables run under it too: the guard is entered outside the compiled
    frame, its wrappers are torch's own while Dynamo traces, and the eager
    calls of the ``"auto"`` policy and the Python between graph breaks are
    watched.
    """
    guarded = guard and d.probe
    context = leak_guard(d) if guarded else nullcontext()
    try:
        with warnings.catch_warnings(), context:
            for message in d.backend.leak_warnings:
                warnings.filterwarnings("error", message=message, category=UserWarning)
            return thunk()
    except LeakError:
        raise
    except Exception as exc:
        raise leak(d, exc, kind) from exc


def run_probe(d: Any, kind: str, x: Any, batched: bool, out: Any, device: Any) -> None:
    """Run the leak probe once (simdiff.core.probe) where the backend's tracer does not.

    A gradient or Jacobian just computed gives the probe its directional
    derivative; other first calls cost the probe one VJP.
    """
    T = d.backend
    if T.catches_leaks:
        d.probe_result = {"status": f"not needed: {T.name}'s tracer raises on leaks"}
        return
    start = time.perf_counter()
    point = T.to_numpy(x)
    point = point[0] if batched else point
    directional = None
    if kind in ("grad", "value_and_grad", "jacobian"):
        jac = T.to_numpy(out[1] if kind == "value_and_grad" else out)
        jac = jac[0] if batched else jac
        directional = lambda v: jac @ v  # noqa: E731
    ops = T.ops(d.dtype, device)
    d.probe_result = guarded(
        d, lambda: probe(d.problem, T, ops, point, d.dtype, directional), "leak probe"
    )
    d.probe_result["seconds"] = time.perf_counter() - start
