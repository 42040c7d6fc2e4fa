"""The compile policy of :class:`simdiff.Derivatives`: ``compile=False | True | "auto"``.

On a backend whose compiler is optional (torch: ``torch.compile``) each
derivative callable runs under one :class:`CompiledCall`, which decides
whether to compile, keeps the numbers behind the decision and reports the
path that ran.  On a backend that always compiles (JAX: ``jax.jit``) the
policy has nothing to decide: ``False`` and ``"auto"`` are accepted and the
path is ``"jit"``; ``True`` is refused because it would promise a second
compiler that does not exist.

``"auto"`` is a break-even rule.  The first two calls run eagerly (the first
pays one-time costs and is not counted); then it knows the eager time per
call ``t_e`` (median of the last five eager calls); compiling costs about
``C`` seconds (:func:`compile_estimate`: a compile time measured in this
process, for the same callable if there was one, else for the same problem,
else for the same derivative kind, else for any; before any was measured, the
prior :data:`COMPILE_PRIOR_S`, the median first compile of a process over the
catalogue).  Compiling pays after ``N* = C / t_e`` further calls (an upper
bound on the break-even, taking the compiled call as free).  When the caller
announced how many calls it will make (``Derivatives.expect_calls``), "auto"
compiles at once if the remaining calls exceed ``N*``; otherwise it compiles
once the eager time already spent on the callable reaches ``C`` (the
ski-rental rule: never more than twice the time of the better choice made in
hindsight).  After compiling it records the compile time (for later
estimates) and the compiled time per call, and returns to eager execution if
the compiled call is not faster.  A compilation that fails keeps torch's
reason; "auto" then runs eagerly and says so (``path="eager"``,
``compile_error=...`` in ``cache_info()``); ``True`` raises
:class:`~simdiff.errors.UnsupportedError` with the reason.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from simdiff._log import get_logger
from simdiff.errors import OptionError, UnsupportedError

__all__ = ["COMPILE_PRIOR_S", "COMPILE_VALUES", "CompiledCall", "check_compile", "compile_estimate"]

#: The values ``compile=`` accepts.
COMPILE_VALUES = (False, True, "auto")

#: Compile-time prior (seconds): the first compile of a process, which also pays
#: Inductor's start-up, is the one made before any was measured.  Its value is the
#: median first compile over the catalogue (the gradient or VJP each problem's process
#: compiled first); the measurements, and how they vary with the machine, are in
#: docs/performance.md.
COMPILE_PRIOR_S = 7.2

#: Every successful compile in this process: ``(callable key, seconds)``; the key is
#: ``(problem, n, kind, parameters, shapes)`` as :class:`CompiledCall` receives it.
_MEASURED_COMPILE_S: list[tuple[tuple, float]] = []

_log = get_logger(__name__)


def check_compile(compile: Any, backend: Any) -> bool | str:
    """Validate ``compile=`` for ``backend``; return it (``False``, ``True`` or ``"auto"``).

    Raises
    ------
    simdiff.errors.OptionError
        ``compile`` is not one of ``False``, ``True``, ``"auto"``, or is ``True``
        on a backend that always compiles (JAX).

    Examples
    --------
    >>> from simdiff.backends import get_backend
    >>> check_compile("auto", get_backend("jax"))
    'auto'
    >>> check_compile("yes", get_backend("jax"))
    Traceback (most recent call last):
    ...
    simdiff.errors.OptionError: compile must be one of False, True, 'auto'; got 'yes'
    """
    if not any(compile is v or (isinstance(compile, str) and compile == v) for v in COMPILE_VALUES):
        raise OptionError(f"compile must be one of False, True, 'auto'; got {compile!r}")
    if compile is True and not backend.optional_compiler:
        raise OptionError(
            f"compile=True means torch.compile and needs backend='torch'; the "
            f"{backend.name!r} backend always compiles (jit), so pass compile=False or 'auto'"
        )
    return compile


def compile_estimate(key: tuple) -> tuple[float, str]:
    """Expected compile seconds of the callable ``key`` and where the number comes from.

    The closest measurement in this process: the same callable (problem,
    derivative, shapes) compiled before, else the same problem, else the same
    derivative kind, else any compile (median of those); without one, the
    prior :data:`COMPILE_PRIOR_S` (a first compile, Inductor's start-up
    included).  A compile that reused Inductor's on-disk cache was faster
    than a cold one, so after it the estimate is low; a cold one after a
    warm one, high.

    Examples
    --------
    Before any compile was measured, then after one of the same derivative kind:

    >>> saved, _MEASURED_COMPILE_S[:] = list(_MEASURED_COMPILE_S), []
    >>> compile_estimate(("p", 2, "grad", (), ((2,),)))
    (7.2, 'prior: median first compile of a process over the catalogue')
    >>> _MEASURED_COMPILE_S.append((("q", 5, "grad", (), ((5,),)), 3.0))
    >>> compile_estimate(("p", 2, "grad", (), ((2,),)))
    (3.0, "measured: 1 compile(s) of 'grad' derivatives")
    >>> _MEASURED_COMPILE_S[:] = saved
    """
    problem, kind = key[:2], key[2]
    for what, same in (
        ("this callable", lambda k: k == key),
        ("this problem", lambda k: k[:2] == problem),
        (f"{kind!r} derivatives", lambda k: k[2] == kind),
        ("any callable", lambda k: True),
    ):
        times = [s for k, s in _MEASURED_COMPILE_S if same(k)]
        if times:
            return statistics.median(times), f"measured: {len(times)} compile(s) of {what}"
    return COMPILE_PRIOR_S, "prior: median first compile of a process over the catalogue"


class CompiledCall:
    """One derivative callable under the compile policy ``True`` or ``"auto"``.

    Parameters
    ----------
    eager : callable
        The torch.func callable.
    compiler : callable
        ``compiler(fn) -> fn`` (the backend's ``compile``).
    mode : {True, "auto"}
    kind : str
        The derivative's name, for messages.
    expected : callable
        Returns the number of calls the caller announced (``None``: not announced).
    key : tuple
        ``(problem name, n, kind, parameters, shapes)``: what the compile-time
        estimate matches measurements by (:func:`compile_estimate`).

    Attributes
    ----------
    path : {"eager", "compiled"}
        What the last call ran.
    record : dict
        The numbers behind the decision, merged into ``Derivatives.cache_info()``.
    """

    def __init__(
        self,
        eager: Callable[..., Any],
        compiler: Callable[[Callable], Callable],
        mode: bool | str,
        kind: str,
        expected: Callable[[], int | None],
        key: tuple = ("", 0, ""),
    ) -> None:
        self.eager = eager
        self.compiler = compiler
        self.mode = mode
        self.kind = kind
        self.expected = expected
        self.key = key
        self.compiled: Callable[..., Any] | None = None
        self.path = "eager"
        self.calls = 0
        self.eager_total_s = 0.0
        self.eager_times: list[float] = []
        self.record: dict[str, Any] = {"compile": mode, "path": "eager"}

    def __call__(self, *args: Any) -> Any:
        self.calls += 1
        if self.path == "compiled" or self.mode is True:
            return self._compiled_call(args)
        if self.mode == "auto" and self.compiled is None and self._pays():
            return self._compiled_call(args)
        start = time.perf_counter()
        out = self.eager(*args)
        self._note_eager(time.perf_counter() - start)
        return out

    # ---------------------------------------------------------------- decision
    def _note_eager(self, seconds: float) -> None:
        if self.calls == 1:
            self.record["warmup_s"] = seconds  # one-time costs (imports, allocator): not t_e
            return
        self.eager_total_s += seconds
        self.eager_times.append(seconds)
        del self.eager_times[:-5]  # a running median over the last few calls
        self.record["eager_s"] = statistics.median(self.eager_times)

    def _pays(self) -> bool:
        if not self.eager_times or self.compiled is not None or "compile_error" in self.record:
            return False  # the first two calls run eager and measure t_e; one compile try at most
        t_e = self.record["eager_s"]
        c, source = compile_estimate(self.key)
        break_even = c / max(t_e, 1e-9)
        expected = self.expected()
        self.record["compile_estimate_s"] = c
        self.record["compile_estimate_source"] = source
        self.record["break_even_calls"] = break_even
        if expected is not None:
            self.record["expected_calls"] = expected
            remaining = expected - (self.calls - 1)
            self.record["reason"] = (
                f"{remaining} remaining of {expected} announced calls vs break-even "
                f"{break_even:.0f} (estimated compile {c:.2g} s / eager {t_e * 1e3:.3g} ms)"
            )
            return remaining > break_even
        self.record["reason"] = (
            f"eager time spent {self.eager_total_s:.3g} s vs estimated compile {c:.2g} s "
            f"(break-even {break_even:.0f} calls at eager {t_e * 1e3:.3g} ms; no calls announced)"
        )
        return self.eager_total_s >= c

    # ---------------------------------------------------------------- compiling
    def _compiled_call(self, args: tuple) -> Any:
        first = self.compiled is None
        start = time.perf_counter()
        try:
            if first:
                self.compiled = self.compiler(self.eager)
            out = self.compiled(*args)  # type: ignore[misc]
        except Exception as exc:  # torch.compile failures come in many types
            reason = f"torch.compile failed on {self.kind}: {type(exc).__name__}: {str(exc)[:500]}"
            if self.mode is True:
                self.compiled = None  # every later call tries again and raises again
                raise UnsupportedError(reason) from exc
            self.path = "eager"
            self.record.update(compile_error=reason, path="eager")
            _log.warning("compile='auto' runs %s of %r eagerly: %s", self.kind, self.key[0], reason)
            return self.eager(*args)
        if first:
            compile_s = time.perf_counter() - start
            _MEASURED_COMPILE_S.append((self.key, compile_s))
            self.path = "compiled"
            self.record.update(compile_s=compile_s, path="compiled")
            _log.info(
                "compiled %s of %r with torch.compile in %.3g s (compile=%r%s)",
                self.kind, self.key[0], compile_s, self.mode,
                f"; {self.record['reason']}" if "reason" in self.record else "",
            )  # fmt: skip
            if self.mode == "auto":
                self._keep_if_faster(args)
        return out

    def _keep_if_faster(self, args: tuple) -> None:
        """Time the compiled call (median of 3); fall back to eager if it is not faster."""
        times = []
        for _ in range(3):
            start = time.perf_counter()
            self.compiled(*args)  # type: ignore[misc]
            times.append(time.perf_counter() - start)
        compiled_s = statistics.median(times)
        t_e = self.record["eager_s"]
        self.record["compiled_s"] = compiled_s
        if compiled_s < t_e:
            self.record["break_even_calls"] = self.record["compile_s"] / (t_e - compiled_s)
        else:
            self.path = "eager"
            self.record.update(
                path="eager",
                reason=f"compiled call ({compiled_s * 1e3:.3g} ms) not faster than eager "
                f"({t_e * 1e3:.3g} ms): kept eager",
            )
            _log.info("%s of %r: %s", self.kind, self.key[0], self.record["reason"])
