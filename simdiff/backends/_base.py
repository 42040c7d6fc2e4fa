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
from ..errors import UnsupportedError

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
    "broadcast_to", "flip", "take", "where", "clip",
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
            raise ValueError("ops.scan: length 0 loops are not supported outside JAX")
        leaves0, treedef = tree_flatten(ys[0])
        if not leaves0:
            return carry, tree_unflatten(treedef, [])
        columns = zip(*(tree_flatten(y)[0] for y in ys), strict=True)
        return carry, tree_unflatten(treedef, [self.stack(list(col)) for col in columns])


def _scan_length(xs: Any, length: int | None) -> int:
    if xs is None:
        if length is None:
            raise ValueError("ops.scan needs xs or length; got neither")
        return int(length)
    leaves, _ = tree_flatten(xs)
    lengths = {int(leaf.shape[0]) for leaf in leaves}
    if len(lengths) != 1:
        raise ValueError(f"ops.scan: xs leaves have different leading lengths {sorted(lengths)}")
    (n,) = lengths
    if length is not None and int(length) != n:
        raise ValueError(f"ops.scan: length={length} but xs has leading length {n}")
    return n


class Backend:
    """A framework simdiff differentiates with: transforms plus conversions.

    Subclasses provide ``grad, jvp, vjp, jacfwd, jacrev, vmap`` with the
    signatures of ``jax``/``torch.func``, ``jit`` (identity where there is no
    compiler), and conversion between native arrays and numpy.
    """

    name: str = "base"
    differentiable: bool = True
    #: True where compiling is a choice (torch.compile); False where the backend
    #: always compiles (jax.jit) or never does (numpy).  See ``simdiff._compile``.
    optional_compiler: bool = False

    def ops(self, dtype: Any = None, device: Any = None) -> Ops:
        raise NotImplementedError

    @staticmethod
    def block_until_ready(x: Any) -> Any:
        """Wait for an asynchronous result (JAX); eager backends return ``x`` at once."""
        return x

    def hessian_method(self, n: int, m: int) -> str:
        """Hessian method for ``method="auto"``: ``n`` inputs, ``m`` outputs (1 if scalar).

        The default is JAX's measured rule (``python -m
        validation.bench_torch_hessian``, docs/performance.md): forward over
        reverse for a scalar function, forward over forward for a vector-valued
        one with no more inputs than outputs (each output's reverse pass costs
        as much as a forward pass over all inputs).  Backends override it.
        """
        return "fwd-fwd" if 1 < m and n <= m else "fwd-rev"

    #: How ``Derivatives.hvp`` differentiates: "fwd-rev" (jvp of the gradient) or
    #: "rev-rev" (gradient of <grad f, v>); measured per backend (docs/performance.md).
    hvp_method: str = "fwd-rev"

    def is_native(self, x: Any) -> bool:
        raise NotImplementedError

    def from_numpy(self, a: Any, dtype: Any, device: Any = None) -> Any:
        raise NotImplementedError

    def to_numpy(self, x: Any) -> Any:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<simdiff backend {self.name!r}>"
