"""The derivative kinds: one table, one generic call, the free functions ``simdiff.grad``, ...

:data:`KINDS` lists every derivative the problem face computes: its name (the
method of :class:`~simdiff.Derivatives` and the function of :mod:`simdiff`),
the arguments it takes before the point ``x`` (in the order of the function:
direction or cotangent first, ``x`` last), which of them are points of the
parameters (flattened where given as a tree), its options, whether a steady
call at a tree of parameters takes the fused path (:mod:`simdiff.core.tree_calls`)
and whether the result comes back in the parameters' structure.  Each free
function is one line over :func:`compute`, which reads the table.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from simdiff.core.boundary import HOST_LEAVES, flat, structured
from simdiff.core.builders import check_order
from simdiff.core.derivatives import Derivatives, cached_derivatives
from simdiff.core.problem import Problem

__all__ = [
    "KINDS",
    "Kind",
    "compute",
    "derivative",
    "derivative_tensor",
    "grad",
    "hessian",
    "hvp",
    "jacobian",
    "jvp",
    "taylor",
    "value_and_grad",
    "vjp",
]


@dataclasses.dataclass(frozen=True)
class Kind:
    """One derivative kind of the problem face.

    Attributes
    ----------
    name : str
        The function (``simdiff.<name>``) and the :class:`~simdiff.Derivatives` method.
    leading : tuple of str
        The arguments before ``x``, in order (``"order"``, ``"direction"``, ``"v"``, ``"u"``).
    points : tuple of str
        Those of ``leading`` that live in the parameters' space (flattened where given
        as a tree of the parameters).
    options : tuple of str
        Its keyword options (``method``, ``mode``, ``sparse``).
    tree_call : bool
        A steady call at a tree of parameters takes the fused path
        (:func:`simdiff.core.tree_calls.fused_call`).
    structured : bool
        The result comes back in the parameters' structure (trees, :class:`~simdiff.Labelled`).
    """

    name: str
    leading: tuple[str, ...] = ()
    points: tuple[str, ...] = ()
    options: tuple[str, ...] = ()
    tree_call: bool = False
    structured: bool = True


#: Every derivative kind of the problem face, by name.
KINDS: dict[str, Kind] = {
    k.name: k
    for k in (
        Kind("grad", tree_call=True),
        Kind("value_and_grad", tree_call=True),
        Kind("hessian", options=("method", "sparse"), tree_call=True),
        Kind("hvp", ("v",), points=("v",)),
        Kind("jvp", ("v",), points=("v",), structured=False),
        Kind("vjp", ("u",)),
        Kind("jacobian", options=("mode",)),
        Kind("derivative", ("order", "direction"), ("direction",), ("method",), structured=False),
        Kind("taylor", ("order", "direction"), ("direction",), structured=False),
        Kind("derivative_tensor", ("order",), options=("method",)),
    )
}


def compute(
    kind: str,
    problem: Problem,
    args: tuple[Any, ...],
    x: Any,
    options: dict[str, Any],
    backend: Any,
    dtype: Any,
    compile: Any,
) -> Any:
    """``kind`` (a key of :data:`KINDS`) of ``problem`` at ``x`` with the arguments ``args``
    (those the kind takes before ``x``) and ``options``: what ``simdiff.<kind>`` returns.

    A steady call at a tree of parameters takes the fused path where the kind has one;
    otherwise points given as trees are flattened, the problem's shared
    :class:`~simdiff.Derivatives` for the settings computes the flat result
    (:func:`~simdiff.core.derivatives.cached_derivatives`), and the result is put back
    in the parameters' structure where the kind's is.
    """
    k = KINDS[kind]
    sparse = bool(options.get("sparse", False))
    d = None
    if k.tree_call and not sparse:
        method = options.get("method", "auto")
        fast, x, d = tree_call(problem, kind, x, backend, dtype, compile, method)
        if fast is not None:
            return fast
    args = tuple(
        flat(problem, a, name) if name in k.points else a
        for name, a in zip(k.leading, args, strict=True)
    )
    x = flat(problem, x)
    if d is None:
        arrays = [a for name, a in zip(k.leading, args, strict=True) if name != "order"]
        d = cached_derivatives(problem, backend, *arrays, x, dtype=dtype, compile=compile)
    out = getattr(d, kind)(*args, x, **options)
    if not k.structured or sparse:
        return out
    order = check_order(args[0]) if "order" in k.leading else 0
    return structured(problem, kind, out, order)


def tree_call(
    problem: Problem,
    kind: str,
    x: Any,
    backend: Any,
    dtype: Any,
    compile: Any,
    method: str = "auto",
) -> tuple[Any, Any, Derivatives | None]:
    """``(result, x, d)``: ``kind`` at a tree point ``x`` as one compiled call
    (:func:`simdiff.core.tree_calls.fused_call`), or ``(None, x, d)`` where the general
    path runs (a flat point, a first call, a backend that does not fuse, ...); there ``x``
    is the flat vector where the tree's leaves are arrays of one framework that join as
    they are, or float64 numpy arrays and numbers of their leaves' shapes (else the point
    as given: the general path flattens and checks it), and ``d`` the
    :class:`~simdiff.Derivatives` looked up here (None where none was)."""
    spec = getattr(problem, "param_spec", None)
    if spec is None or x is None or type(x) is np.ndarray or not spec.is_input(x):
        return None, x, None
    parts = spec.matching_leaves(x)
    if parts is None:
        return None, x, None
    d = cached_derivatives(problem, backend, x, dtype=dtype, compile=compile)
    out = d._fused_call(kind, parts, method)
    if out is not None:
        return out, x, d
    if type(parts[0]) in HOST_LEAVES:  # numpy leaves and numbers: one float64 vector
        joined = spec.host_vector(parts)
    else:
        joined = spec._join_native(parts)
    return None, (x if joined is None else joined), d


def grad(
    problem: Problem,
    x: Any = None,
    *,
    backend: str | None = None,
    dtype: Any = None,
    compile: bool | str = False,
) -> Any:
    """Gradient of a scalar problem.

    Parameters
    ----------
    problem : Problem
        Scalar-valued.
    x : array_like, shape (n,) or (batch, n), optional
        Point(s); default ``problem.x0``.
    backend : {"jax", "torch"}, optional
        Default (``None``): the framework of a traced argument (called inside
        ``jax.jit``/``vmap``/``grad`` or a ``torch.func`` transform), else
        ``problem.default_backend`` (torch for :meth:`Problem.from_torch`,
        jax otherwise); every function of this module takes it.
    dtype : {"float64", "float32"}, optional
    compile : {False, True, "auto"}
        Compile policy on torch (see :class:`Derivatives`); every function of
        this module takes it and shares one cached ``Derivatives`` per setting.

    Returns
    -------
    array, shape (n,) or (batch, n)
        Same array type as ``x``; inside a framework transform, the backend's
        own (traced) arrays (docs/composability.md).

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> p = simdiff.Problem(lambda x, ops: ops.sum(x ** 2), x0=np.array([1.0, 2.0]))
    >>> simdiff.grad(p)
    array([2., 4.])
    >>> simdiff.grad(p, np.ones((3, 2)), backend="torch").shape
    (3, 2)
    """
    return compute("grad", problem, (), x, {}, backend, dtype, compile)


def value_and_grad(
    problem: Problem,
    x: Any = None,
    *,
    backend: str | None = None,
    dtype: Any = None,
    compile: bool | str = False,
) -> Any:
    """``(f(x), grad f(x))`` of a scalar problem in one reverse pass.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> p = simdiff.Problem(lambda x, ops: ops.sum(x ** 2), x0=np.array([1.0, 2.0]))
    >>> simdiff.value_and_grad(p)
    (array(5.), array([2., 4.]))
    """
    return compute("value_and_grad", problem, (), x, {}, backend, dtype, compile)


def hessian(
    problem: Problem,
    x: Any = None,
    *,
    backend: str | None = None,
    method: str = "auto",
    dtype: Any = None,
    compile: bool | str = False,
    sparse: bool = False,
) -> Any:
    """Hessian, shape ``(out..., n, n)`` (``(n, n)`` for a scalar problem).

    ``method``: ``"fwd-rev"`` (forward over reverse), ``"rev-rev"`` or
    ``"fwd-fwd"``, all the same matrix to rounding; ``"structured"`` assembles
    it from the problem's structure (a sum of terms, :func:`simdiff.pes.term_energy`,
    :func:`simdiff.pes.cluster_problem`).  ``"auto"`` is ``"structured"`` where
    the problem has structure, else the backend's choice (:func:`auto_hessian_method`).

    The result is dense, as JAX and torch users expect.  ``sparse=True``
    returns the structured Hessian as a ``scipy.sparse.csr_array`` instead
    (one point ``x`` of shape ``(n,)``; no ``n^2`` output, so ``O(terms)`` for
    a sum of terms with a cutoff); it raises
    :class:`~simdiff.errors.UnsupportedError` for a problem without structure
    and :class:`~simdiff.errors.OptionError` with a dense AD ``method``.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> p = simdiff.Problem(lambda x, ops: x[0] ** 2 * x[1], x0=np.array([1.0, 2.0]))
    >>> simdiff.hessian(p)
    array([[4., 2.],
           [2., 0.]])
    """
    return compute(
        "hessian", problem, (), x, {"method": method, "sparse": sparse}, backend, dtype, compile
    )


def hvp(
    problem: Problem,
    v: Any,
    x: Any = None,
    *,
    backend: str | None = None,
    dtype: Any = None,
    compile: bool | str = False,
) -> Any:
    """Hessian-vector product ``H(x) v`` of a scalar problem without forming ``H``.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> p = simdiff.Problem(lambda x, ops: x[0] ** 2 * x[1], x0=np.array([1.0, 2.0]))
    >>> simdiff.hvp(p, np.array([1.0, 0.0]))
    array([4., 2.])
    """
    return compute("hvp", problem, (v,), x, {}, backend, dtype, compile)


def jvp(
    problem: Problem,
    v: Any,
    x: Any = None,
    *,
    backend: str | None = None,
    dtype: Any = None,
    compile: bool | str = False,
) -> Any:
    """Jacobian-vector product ``J(x) v`` (forward mode), shape ``out``.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> p = simdiff.Problem(lambda x, ops: ops.stack([x[0] * x[1], ops.sin(x[0])]),
    ...                     x0=np.array([0.0, 2.0]))
    >>> simdiff.jvp(p, np.array([1.0, 0.0]))
    array([2., 1.])
    """
    return compute("jvp", problem, (v,), x, {}, backend, dtype, compile)


def vjp(
    problem: Problem,
    u: Any,
    x: Any = None,
    *,
    backend: str | None = None,
    dtype: Any = None,
    compile: bool | str = False,
) -> Any:
    """Vector-Jacobian product ``u^T J(x)`` (reverse mode), shape ``(n,)``.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> p = simdiff.Problem(lambda x, ops: ops.stack([x[0] * x[1], ops.sin(x[0])]),
    ...                     x0=np.array([0.0, 2.0]))
    >>> simdiff.vjp(p, np.array([1.0, 1.0]))
    array([3., 0.])
    """
    return compute("vjp", problem, (u,), x, {}, backend, dtype, compile)


def jacobian(
    problem: Problem,
    x: Any = None,
    *,
    backend: str | None = None,
    mode: str = "auto",
    dtype: Any = None,
    compile: bool | str = False,
) -> Any:
    """Jacobian, shape ``(out..., n)``; ``mode`` is ``"fwd"``, ``"rev"`` or ``"auto"``.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> p = simdiff.Problem(lambda x, ops: ops.stack([x[0] * x[1], ops.sin(x[0])]),
    ...                     x0=np.array([0.0, 2.0]))
    >>> simdiff.jacobian(p)
    array([[2., 0.],
           [1., 0.]])
    """
    return compute("jacobian", problem, (), x, {"mode": mode}, backend, dtype, compile)


def derivative(
    problem: Problem,
    order: int,
    direction: Any,
    x: Any = None,
    *,
    backend: str | None = None,
    method: str = "auto",
    dtype: Any = None,
    compile: bool | str = False,
) -> Any:
    """The ``order``-th directional derivative ``d^k/dt^k f(x + t v) |_{t=0}``.

    ``method="taylor"`` propagates a truncated Taylor series in one pass (cost
    polynomial in the order); ``"nested"`` nests ``jvp`` (cost exponential in
    the order on eager backends).  ``"auto"`` (the default) is ``"taylor"``,
    or ``"nested"`` for a problem that does not run in the Taylor context
    (:meth:`Problem.from_jax`, :meth:`Problem.from_torch`); the choice and
    its reason are in :meth:`Derivatives.cache_info`.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> p = simdiff.Problem(lambda x, ops: ops.sum(ops.exp(2.0 * x)), x0=np.zeros(1))
    >>> float(simdiff.derivative(p, 3, np.ones(1), method="nested"))
    8.0
    """
    return compute(
        "derivative", problem, (order, direction), x, {"method": method}, backend, dtype, compile
    )


def taylor(
    problem: Problem,
    order: int,
    direction: Any,
    x: Any = None,
    *,
    backend: str | None = None,
    dtype: Any = None,
    compile: bool | str = False,
) -> Any:
    """Taylor coefficients ``c_0..c_K`` of ``t -> f(x + t v)``, shape ``(K+1, out...)``.

    ``c_k = f^{(k)} / k!`` along ``direction``; a batch axis comes first.
    Arguments in the order of :func:`derivative`; ``x`` defaults to
    ``problem.x0``.  A call in the retired order ``(problem, x, direction,
    order)`` raises :class:`~simdiff.errors.ArgumentOrderError`.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> p = simdiff.Problem(lambda x, ops: ops.sum(ops.exp(x)), x0=np.zeros(1))
    >>> simdiff.taylor(p, 3, np.ones(1), np.zeros(1))
    array([1.        , 1.        , 0.5       , 0.16666667])
    """
    return compute("taylor", problem, (order, direction), x, {}, backend, dtype, compile)


def derivative_tensor(
    problem: Problem,
    order: int,
    x: Any = None,
    *,
    method: str = "nested",
    backend: str | None = None,
    dtype: Any = None,
    compile: bool | str = False,
) -> Any:
    """Full ``order``-th derivative tensor, shape ``(out..., n, ..., n)``.

    Parameters
    ----------
    problem : Problem
    order : int
        ``d >= 0``.
    x : array_like, shape (n,) or (batch, n), optional
        Default ``problem.x0``.
    method : {"nested", "taylor"}
        ``"nested"``: ``jacrev`` inside ``d - 1`` ``jacfwd`` (cost grows like
        ``n**d`` forward passes; needs a differentiating backend).
        ``"taylor"``: one batched Taylor propagation of order ``d`` along the
        ``binom(n+d-1, d)`` directions with ``|i| = d``, and the exact
        interpolation of Griewank, Utke & Walther (2000) (also runs on
        ``backend="numpy"``; its weights grow with ``d``, so a few digits are
        lost at high order: tested to ``d = 4``, ``n = 8``).
    backend : {"jax", "torch"} (``"numpy"`` too with ``method="taylor"``)
    dtype : {"float64", "float32"}, optional

    Returns
    -------
    array, shape ``(*out_shape, n, ..., n)`` (``order`` trailing axes), batch axis first
        Symmetric in its last ``order`` axes; same array type as ``x``.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> p = simdiff.Problem(lambda x, ops: x[0] ** 2 * x[1], x0=np.array([1.0, 2.0]))
    >>> simdiff.derivative_tensor(p, 3)[0]
    array([[0., 2.],
           [2., 0.]])
    >>> simdiff.derivative_tensor(p, 2, method="taylor", backend="numpy")
    array([[4., 2.],
           [2., 0.]])
    """
    return compute(
        "derivative_tensor", problem, (order,), x, {"method": method}, backend, dtype, compile
    )
