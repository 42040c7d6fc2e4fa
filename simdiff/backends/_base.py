"""The ``ops`` protocol: the namespace a problem is written against.

A problem is ``fn(x, ops)``.  ``ops`` offers Array-API names and semantics
plus the three things simulators need and the Array API lacks (``scan``,
``checkpoint``, ``stop_gradient``).  Every context (numpy, jax, torch, taylor)
implements every name in :data:`OP_NAMES`; a test enumerates the list.

Arithmetic (``+ - * / ** @``), comparisons and indexing (``x[i]``,
``x[:, None]``) are the arrays' own operators and are not listed here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._tree import tree_flatten, tree_map, tree_unflatten
from ..errors import InputError, UnsupportedError

__all__ = ["OP_NAMES", "Backend", "LoopOps", "Namespace", "Ops"]

UNARY = (
    "abs", "negative", "sign", "sqrt", "square", "exp", "expm1", "log", "log1p",
    "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh",
    "asinh", "acosh", "atanh", "isfinite", "floor", "round",
)  # fmt: skip
BINARY = ("add", "subtract", "multiply", "divide", "pow", "atan2", "maximum", "minimum")
REDUCTIONS = ("sum", "prod", "mean", "max", "min", "cumsum")
SHAPE = (
    "reshape", "stack", "concat", "roll", "permute_dims", "expand_dims", "squeeze",
    "broadcast_to", "flip", "take", "where", "safe_where", "clip",
)  # fmt: skip
LINEAR = ("matmul", "vecdot", "einsum", "linalg.solve", "fft.rfft", "fft.irfft", "fft.fft",
          "fft.ifft")  # fmt: skip
CREATION = (
    "asarray", "zeros", "ones", "full", "zeros_like", "ones_like", "full_like", "arange",
    "linspace", "eye", "fft.rfftfreq", "fft.fftfreq",
)  # fmt: skip
CONTROL = ("scan", "checkpoint", "stop_gradient")

#: Every operation each context must provide (dotted names live in sub-namespaces).
OP_NAMES: tuple[str, ...] = UNARY + BINARY + REDUCTIONS + SHAPE + LINEAR + CREATION + CONTROL

#: Non-callable attributes each context provides.
CONSTANTS = ("pi", "e", "inf", "name", "dtype")


class Namespace:
    """A sub-namespace such as ``ops.linalg`` or ``ops.fft``."""

    def __init__(self, **members: Callable[..., Any]) -> None:
        self.__dict__.update(members)


class Ops:
    """Base class of the ``ops`` namespaces.

    Attributes
    ----------
    name : str
        The context: ``"numpy"``, ``"jax"``, ``"torch"`` or ``"taylor"``.
    dtype : object
        The floating dtype new arrays get (float64 unless asked otherwise).
    """

    name: str = "base"
    pi = 3.141592653589793
    e = 2.718281828459045
    inf = float("inf")

    def __getattr__(self, item: str) -> Any:
        # Only reached for names the context lacks.
        raise UnsupportedError(
            f"operation ops.{item} is not available in the {self.name!r} context"
        )

    def __repr__(self) -> str:
        return f"<simdiff ops: {self.name}, dtype={self.dtype}>"

    def safe_where(
        self,
        condition: Any,
        x: Any,
        if_true: Any,
        if_false: Any = 0.0,
        *,
        fill_true: Any = 1.0,
        fill_false: Any = 1.0,
    ) -> Any:
        """``where(condition, if_true(x), if_false(x))`` with finite derivatives in every context.

        The "double where": ``ops.where(x > 0, ops.sqrt(x), 0.0)`` has the
        right value at ``x = -1`` but a NaN derivative, because the branch
        not taken is still differentiated (``0 * sqrt'(-1) = 0 * nan``).
        Here each callable branch is evaluated only at points where it is
        selected; elsewhere its argument is replaced by ``fill_true`` /
        ``fill_false`` (a point where the branch is smooth), so the
        derivative of the result is that of the selected branch.

        Parameters
        ----------
        condition : boolean array
            Where to take ``if_true``; it must not depend on derivatives
            (comparisons of arrays are fine).
        x : array
            The argument of the branches.
        if_true, if_false : callable or array_like
            A function of one array (applied to ``x``), or a value.
        fill_true, fill_false : float
            Stand-in arguments for the branch where it is not selected; the
            default 1.0 suits ``sqrt``, ``log`` and ``1 / x``.

        Returns
        -------
        array
            The broadcast shape of ``condition``, ``x`` and the branches.

        Examples
        --------
        >>> import numpy as np, simdiff
        >>> p = simdiff.Problem(
        ...     lambda x, ops: ops.sum(ops.safe_where(x > 0, x, ops.sqrt, 0.0)),
        ...     x0=np.array([-1.0, 4.0]))
        >>> simdiff.grad(p)            # sqrt'(4) = 0.25, and 0 (not nan) at x = -1
        array([0.  , 0.25])
        """
        t = if_true(self.where(condition, x, fill_true)) if callable(if_true) else if_true
        f = if_false(self.where(condition, fill_false, x)) if callable(if_false) else if_false
        return self.where(condition, t, f)


class LoopOps(Ops):
    """Shared Python-loop implementation of ``scan`` for the eager contexts."""

    def scan(
        self,
        step: Callable[[Any, Any], tuple[Any, Any]],
        carry: Any,
        xs: Any = None,
        length: int | None = None,
    ) -> tuple[Any, Any]:
        """Loop ``carry, y = step(carry, x)`` over the leading axis of ``xs``.

        Same contract as ``jax.lax.scan``: returns the final carry and the
        ``y`` values stacked on a new leading axis (``None`` if ``step``
        returns ``None``).  Here it runs as a Python loop.
        """
        n = _scan_length(xs, length)
        ys = []
        for i in range(n):
            x = None if xs is None else tree_map(lambda a, i=i: a[i], xs)
            carry, y = step(carry, x)
            ys.append(y)
        if n == 0:
            raise InputError("ops.scan: length 0 loops are not supported outside JAX")
        leaves0, treedef = tree_flatten(ys[0])
        if not leaves0:
            return carry, tree_unflatten(treedef, [])
        columns = zip(*(tree_flatten(y)[0] for y in ys), strict=True)
        return carry, tree_unflatten(treedef, [self.stack(list(col)) for col in columns])


def _scan_length(xs: Any, length: int | None) -> int:
    if xs is None:
        if length is None:
            raise InputError("ops.scan needs xs or length; got neither")
        return int(length)
    leaves, _ = tree_flatten(xs)
    lengths = {int(leaf.shape[0]) for leaf in leaves}
    if len(lengths) != 1:
        raise InputError(f"ops.scan: xs leaves have different leading lengths {sorted(lengths)}")
    (n,) = lengths
    if length is not None and int(length) != n:
        raise InputError(f"ops.scan: length={length} but xs has leading length {n}")
    return n


class Backend:
    """A framework simdiff differentiates with: transforms plus conversions.

    Subclasses provide ``grad, jvp, vjp, jacfwd, jacrev, vmap`` with the
    signatures of ``jax``/``torch.func``, ``jit`` (identity where there is no
    compiler), and conversion between native arrays and numpy.
    """

    name: str = "base"
    differentiable: bool = True
    #: The tracer itself raises when a problem leaves the traced computation
    #: (``float(x)``, ``.item()``, numpy): JAX.  Where it does not (torch), the
    #: leak probe of :class:`simdiff.Derivatives` checks the first call.
    catches_leaks: bool = False

    def leak_cause(self, exc: BaseException) -> str | None:
        """What ``exc`` says the problem did to leave the traced computation, or None."""
        return None

    #: Messages (regular expressions) of warnings the framework emits when a value
    #: leaves the traced computation; simdiff turns them into errors (``leak_cause``).
    leak_warnings: tuple[str, ...] = ()

    def ops(self, dtype: Any = None, device: Any = None) -> Ops:
        raise NotImplementedError

    @staticmethod
    def block_until_ready(x: Any) -> Any:
        """Wait for an asynchronous result (JAX); eager backends return ``x`` at once."""
        return x

    def is_native(self, x: Any) -> bool:
        raise NotImplementedError

    def from_numpy(self, a: Any, dtype: Any, device: Any = None) -> Any:
        raise NotImplementedError

    def to_numpy(self, x: Any) -> Any:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<simdiff backend {self.name!r}>"
