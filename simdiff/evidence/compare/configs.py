"""Configurations for :func:`simdiff.compare`: the ways a derivative can be computed.

A *configuration* is a way of computing a derivative: ``jax-jit``
(:class:`~simdiff.Derivatives` on JAX, jit-compiled), ``torch-eager``
(torch.func transforms), ``torch-compile`` (the same under ``torch.compile``),
``scipy-fd`` (``scipy.differentiate`` finite differences of the numpy
context) and ``numdifftools`` (its adaptive finite differences).  Configurations
live in :data:`CONFIGS`, a registry of ``name -> builder``; other modules add
theirs with :func:`register_config` (the ODE engines add diffrax and
torchdiffeq).  A :class:`Task` is one derivative with its inputs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from simdiff.core.derivatives import Derivatives
from simdiff.core.problem import Problem
from simdiff.errors import InputError, ShapeError, UnsupportedError

__all__ = [
    "CONFIGS",
    "Builder",
    "Task",
    "config_backend",
    "make_task",
    "register_config",
]

#: A builder gets ``(problem, task)`` and returns a zero-argument callable that
#: computes the task's derivative, waits for it (``block_until_ready``) and
#: returns it.  It raises ``UnsupportedError`` when the configuration cannot do
#: the task; any other exception is reported as the configuration's failure.
Builder = Callable[[Problem, "Task"], Callable[[], Any]]
CONFIGS: dict[str, Builder] = {}
#: The simdiff backend each configuration runs on (absent: none, e.g. finite differences).
_BACKENDS: dict[str, str] = {}


def register_config(
    name: str, builder: Builder, *, replace: bool = False, backend: str | None = None
) -> None:
    """Add a configuration to :data:`CONFIGS`.

    ``backend`` names the simdiff backend the configuration computes with
    (so that :func:`config_backend` can tell, e.g., which problems it can run);
    leave it ``None`` for configurations that use no backend's transforms.

    Examples
    --------
    >>> import numpy as np
    >>> from simdiff.evidence.compare.configs import register_config, CONFIGS
    >>> register_config("zeros", lambda problem, task: (lambda: np.zeros(problem.n)),
    ...                 replace=True)
    >>> "zeros" in CONFIGS
    True
    """
    if name in CONFIGS and not replace:
        raise InputError(f"configuration {name!r} is already registered")
    CONFIGS[name] = builder
    if backend is None:
        _BACKENDS.pop(name, None)
    else:
        _BACKENDS[name] = backend


def config_backend(name: str) -> str | None:
    """The simdiff backend configuration ``name`` computes with, or ``None``.

    Examples
    --------
    >>> from simdiff.evidence.compare.configs import config_backend
    >>> config_backend("torch-compile"), config_backend("scipy-fd")
    ('torch', None)
    """
    return _BACKENDS.get(name)


# --------------------------------------------------------------------------- tasks


@dataclass(frozen=True)
class Task:
    """One derivative to compute: ``kind`` with its inputs.

    ``kind`` is ``value``, ``grad``, ``hessian``, ``hvp``, ``jvp``, ``vjp``,
    ``jacobian`` or ``derivative`` (directional, ``order`` and ``method``
    ``"nested"`` or ``"taylor"``).  ``x`` is ``(n,)`` or ``(batch, n)``; ``v``
    (hvp/jvp/derivative direction) and ``u`` (vjp cotangent) likewise.
    """

    kind: str
    x: np.ndarray
    v: np.ndarray | None = None
    u: np.ndarray | None = None
    order: int = 0
    method: str = "nested"

    @property
    def label(self) -> str:
        if self.kind == "derivative":
            return f"derivative{self.order}" + (".taylor" if self.method == "taylor" else "")
        return self.kind

    @property
    def batch(self) -> int:
        return int(self.x.shape[0]) if self.x.ndim == 2 else 0


def make_task(problem: Problem, label: str, x: Any = None, seed: int = 0) -> Task:
    """A :class:`Task` from a label such as ``"hessian"`` or ``"derivative3.taylor"``."""
    x = problem.x0 if x is None else np.asarray(x, dtype=np.float64)
    rng = np.random.default_rng(seed)
    lead = x.shape[:-1]
    v = rng.standard_normal((*lead, problem.n))
    u = rng.standard_normal((*lead, *problem.output_shape))
    if label.startswith("derivative"):
        body, _, method = label[len("derivative") :].partition(".")
        if not body.isdigit():
            raise InputError(f"derivative labels are 'derivative<k>[.taylor]'; got {label!r}")
        return Task("derivative", x, v=v, order=int(body), method=method or "nested")
    kinds = ("value", "grad", "hessian", "hvp", "jvp", "vjp", "jacobian")
    if label not in kinds:
        raise InputError(
            f"unknown derivative {label!r}; expected one of {list(kinds)} "
            "or 'derivative<k>[.taylor]'"
        )
    return Task(label, x, v=v, u=u)


# --------------------------------------------------------------------------- builders


def _ad_builder(backend: str, compile: bool = False) -> Builder:
    def build(problem: Problem, task: Task) -> Callable[[], Any]:
        d = Derivatives(problem, backend, compile=compile, check_finite=False, structured=False)
        be = d.backend
        x, v, u = (
            None if a is None else be.from_numpy(a, d.dtype) for a in (task.x, task.v, task.u)
        )
        k = task.kind
        fns: dict[str, Callable[[], Any]] = {
            "value": lambda: d.value(x),
            "grad": lambda: d.grad(x),
            "hessian": lambda: d.hessian(x),
            "hvp": lambda: d.hvp(v, x),
            "jvp": lambda: d.jvp(v, x),
            "vjp": lambda: d.vjp(u, x),
            "jacobian": lambda: d.jacobian(x),
            "derivative": lambda: d.derivative(task.order, v, x, method=task.method),
        }
        fn = fns[k]

        def call() -> Any:
            return be.block_until_ready(fn())

        call.derivatives = d  # type: ignore[attr-defined]
        return call

    return build


def _given(a: np.ndarray | None, what: str, task: Task) -> np.ndarray:
    if a is None:
        raise InputError(f"task {task.label!r} needs {what}; it was built without one")
    return a


def _contract(u: np.ndarray, jac: np.ndarray) -> np.ndarray:
    return np.tensordot(u, jac, axes=u.ndim)


def _scipy_fd(problem: Problem, task: Task) -> Callable[[], Any]:
    from simdiff.evidence.check.fd import FiniteDifferences, default_fd_step, numpy_vectorized

    if task.batch:
        raise UnsupportedError("scipy-fd is compared at single points only, not batched x")
    f, x, k = numpy_vectorized(problem), task.x, task.kind
    fd = FiniteDifferences(default_fd_step(problem, x))
    if k == "derivative":
        if task.order != 1:
            raise UnsupportedError(
                f"scipy.differentiate gives first derivatives only (asked for order {task.order})"
            )
        return lambda: fd.direction(f, x, _given(task.v, "v", task))[0]
    table: dict[str, Callable[[], Any]] = {
        "value": lambda: f(x[:, None])[..., 0],
        "grad": lambda: fd.jacobian(f, x)[0],
        "jacobian": lambda: fd.jacobian(f, x)[0],
        "hessian": lambda: fd.hessian(f, x)[0],
        "hvp": lambda: fd.hessian(f, x)[0] @ _given(task.v, "v", task),
        "jvp": lambda: fd.direction(f, x, _given(task.v, "v", task))[0],
        "vjp": lambda: _contract(_given(task.u, "u", task), fd.jacobian(f, x)[0]),
    }
    return table[k]


def _numdifftools(problem: Problem, task: Task) -> Callable[[], Any]:
    import numdifftools as nd

    if task.batch:
        raise UnsupportedError("numdifftools is compared at single points only, not batched x")

    def f(y: np.ndarray) -> Any:
        return problem.evaluate(y)

    table = {"grad": nd.Gradient, "hessian": nd.Hessian, "jacobian": nd.Jacobian}
    if task.kind not in table:
        raise UnsupportedError(
            f"numdifftools configuration covers {sorted(table)}; not {task.kind}"
        )
    n = int(task.x.shape[0])
    # numdifftools squeezes (a one-parameter gradient comes back as a scalar); the
    # result is given the shape every other configuration returns, or refused.
    shape = {"grad": (n,), "hessian": (n, n), "jacobian": (*problem.output_shape, n)}[task.kind]
    op = table[task.kind](f)

    def call() -> np.ndarray:
        # numdifftools' default step sequence starts from large steps and discards
        # what Richardson extrapolation finds inaccurate; on a simulator a large
        # trial step can overflow (an unstable time step), which is part of how the
        # peer works, not a result: its accuracy is measured like every other's.
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            value = np.asarray(op(task.x))
        if value.size != math.prod(shape):
            raise ShapeError(
                f"numdifftools returned shape {value.shape} for the {task.kind}; expected {shape}"
            )
        return value.reshape(shape)

    return call


register_config("jax-jit", _ad_builder("jax"), backend="jax")
register_config("torch-eager", _ad_builder("torch"), backend="torch")
register_config("torch-compile", _ad_builder("torch", compile=True), backend="torch")
register_config("scipy-fd", _scipy_fd)
register_config("numdifftools", _numdifftools)
