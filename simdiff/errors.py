"""Exceptions raised by simdiff.

Every error simdiff raises derives from :class:`SimdiffError`.  Where a
built-in exception type is the natural one for a caller to catch, the simdiff
error also derives from it (``ShapeError`` is a ``ValueError``, ``DTypeError``
a ``TypeError``), so ``except ValueError`` keeps working.
"""

from __future__ import annotations

__all__ = [
    "BackendUnavailable",
    "DTypeError",
    "InputError",
    "InputTypeError",
    "NonFiniteError",
    "PrecisionWarning",
    "ShapeError",
    "SimdiffError",
    "SolverError",
    "StabilityError",
    "UnsupportedError",
]


class SimdiffError(Exception):
    """Base class of every simdiff error."""


class ShapeError(SimdiffError, ValueError):
    """An array has the wrong shape; the message names the expected and the actual shape."""


class DTypeError(SimdiffError, TypeError):
    """An array has the wrong dtype; the message names the expected and the actual dtype."""


class InputError(SimdiffError, ValueError):
    """An argument has an invalid value; the message names it, the expected and the actual."""


class InputTypeError(SimdiffError, TypeError):
    """An argument has the wrong type; the message names it, the expected and the actual."""


class NonFiniteError(SimdiffError, FloatingPointError):
    """A derivative came out NaN or infinite; it is reported, never returned as valid."""


class UnsupportedError(SimdiffError, NotImplementedError):
    """An operation or transform is not available in a context.

    The message names the operation and the context (backend) that lacks it.
    """


class BackendUnavailable(SimdiffError, ImportError):
    """A backend's framework is not installed; the message says how to install it."""


class SolverError(SimdiffError, RuntimeError):
    """A numerical solver failed (step budget exhausted, step size underflow, ...)."""


class StabilityError(SimdiffError, ValueError):
    """An explicit time step exceeds the method's stability limit; the message names the limit."""


class PrecisionWarning(UserWarning):
    """An input carries less precision than the computation (e.g. float32 data, float64 maths).

    A common cause: a ``jax.Array`` created before JAX's 64-bit mode was on is
    float32; simdiff switches x64 on when its jax backend loads, which may be
    after the array was made.
    """
