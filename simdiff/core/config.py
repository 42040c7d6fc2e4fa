"""One frozen configuration of the derivative engine, passed down instead of loose flags.

Code below the public functions receives one :class:`Config` and never a loose
``backend``, ``dtype``, ``compile`` or ``expected_calls`` argument: the public
functions (``simdiff.grad``, ``Derivatives``, the simulators' analyses) build
it once from their keywords, and everything they call reads its fields.  It
is immutable (a frozen dataclass, hashable, so it can key caches);
:meth:`Config.replace` derives a changed copy, as :func:`dataclasses.replace`
does.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from simdiff.errors import OptionError

__all__ = ["COMPILE_VALUES", "Config"]

#: The values ``compile=`` accepts.
COMPILE_VALUES = (False, True, "auto")


@dataclasses.dataclass(frozen=True)
class Config:
    """How derivatives are computed: backend, dtype, compile policy, expected calls, checks.

    Parameters
    ----------
    backend : {"jax", "torch", "numpy"} or None
        None: the problem's default backend (or the one of the input arrays).
    dtype : {"float64", "float32"} or None
        Computation dtype; None is float64.
    compile : {False, True, "auto"}
        The compile policy (see :mod:`simdiff.core.compile`): torch's
        ``torch.compile`` on ``True``, the break-even rule on ``"auto"``; JAX
        always jit-compiles.
    expected_calls : int or None
        How many calls the caller will make of each derivative (the "auto"
        policy compiles at once when they pay for the compile); None: unknown.
    check_finite : bool
        Reject non-finite inputs and results.
    probe : {None, True, False, "strict"}
        The leak probe (None: as ``check_finite``); see :class:`simdiff.Derivatives`.

    Raises
    ------
    simdiff.errors.OptionError
        A field outside the values above.

    Examples
    --------
    >>> from simdiff.core.config import Config
    >>> c = Config(backend="torch", compile="auto")
    >>> c.replace(expected_calls=50).expected_calls
    50
    >>> Config(compile="yes")
    Traceback (most recent call last):
    ...
    simdiff.errors.OptionError: compile must be one of False, True, 'auto'; got 'yes'
    """

    backend: str | None = None
    dtype: Any = None
    compile: bool | str = False
    expected_calls: int | None = None
    check_finite: bool = True
    probe: bool | str | None = None

    def __post_init__(self) -> None:
        c = self.compile
        if not any(c is v or (isinstance(c, str) and c == v) for v in COMPILE_VALUES):
            raise OptionError(f"compile must be one of False, True, 'auto'; got {c!r}")
        n = self.expected_calls
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 0):
            raise OptionError(f"expected_calls must be a non-negative int or None; got {n!r}")
        if self.probe not in (None, True, False, "strict"):
            raise OptionError(f"probe must be True, False or 'strict'; got {self.probe!r}")
        if self.backend is not None and not isinstance(self.backend, str):
            # a Backend object: keep its name, so the configuration stays hashable and printable
            object.__setattr__(self, "backend", str(getattr(self.backend, "name", self.backend)))
        if self.dtype is not None and not isinstance(self.dtype, str):
            object.__setattr__(self, "dtype", _dtype_name(self.dtype))

    def replace(self, **changes: Any) -> Config:
        """A copy with ``changes`` applied (validated like the original)."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def of(cls, config: Config | None = None, **fields: Any) -> Config:
        """``config`` with the fields that are not None replaced (a new Config if None).

        The public functions take both a ``config=`` and the familiar keywords
        (``backend=``, ``compile=``, ...); the keywords win where given.
        """
        base = cls() if config is None else config
        if not isinstance(base, cls):
            raise OptionError(f"config must be a simdiff Config; got {type(base).__name__}")
        given = {k: v for k, v in fields.items() if v is not None}
        return base.replace(**given) if given else base


def _dtype_name(dtype: Any) -> str:
    """``np.float32``, ``torch.float32``, ``"float32"`` -> ``"float32"``."""
    name = getattr(dtype, "__name__", None) or str(dtype)
    return name.replace("torch.", "").replace("numpy.", "")
