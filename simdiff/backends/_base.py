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
CONTROL = ("scan", "while_loop", "cond", "checkpoint", "stop_gradient")

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
    #: True where Python control flow runs on concrete values (numpy, torch, and the
    #: taylor context over them), so a loop can stop as soon as its condition fails;
    #: False where functions are traced and compiled (jax), so loops need static bounds.
    eager: bool = False
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
    """Shared Python-loop implementations of ``scan``, ``while_loop`` and ``cond`` (eager contexts).

    ``while_loop`` and ``cond`` read their predicate as a Python bool.  Where
    it has no value (a batched tensor under ``torch.func.vmap``) they fall back
    to what ``jax.vmap`` does with ``lax.while_loop``/``lax.cond``: run both
    sides and select elementwise with ``where``.
    """

    eager = True

    def _select(self, pred: Any, new: Any, old: Any) -> Any:
        return tree_map(lambda a, b: self.where(pred, a, b), new, old)

    def while_loop(
        self,
        cond: Callable[[Any], Any],
        body: Callable[[Any], Any],
        carry: Any,
        max_steps: int,
    ) -> Any:
        """``carry = body(carry)`` while ``cond(carry)``, at most ``max_steps`` times.

        Same contract as ``jax.lax.while_loop`` with an iteration bound.  Here a
        Python loop that stops as soon as ``cond`` is false; when ``cond`` cannot
        be read (under ``torch.func.vmap``) every iteration runs and the carry is
        updated only where ``cond`` holds.
        """
        for _ in range(int(max_steps)):
            pred = cond(carry)
            try:
                go = bool(pred)
            except RuntimeError:  # batched under torch.func.vmap: no Python value
                carry = self._select(pred, body(carry), carry)
                continue
            if not go:
                break
            carry = body(carry)
        return carry

    def cond(
        self,
        pred: Any,
        true_fn: Callable[..., Any],
        false_fn: Callable[..., Any],
        *operands: Any,
    ) -> Any:
        """``true_fn(*operands)`` if ``pred`` else ``false_fn(*operands)`` (``jax.lax.cond``).

        A Python ``if``; when ``pred`` has no Python value (under
        ``torch.func.vmap``) both branches run and ``where`` selects.
        """
        try:
            take = bool(pred)
        except RuntimeError:  # batched under torch.func.vmap
            return self._select(pred, true_fn(*operands), false_fn(*operands))
        return true_fn(*operands) if take else false_fn(*operands)

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
