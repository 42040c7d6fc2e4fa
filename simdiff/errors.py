"""Exceptions raised by simdiff.

Every error simdiff raises derives from :class:`SimdiffError`.  Where a
built-in exception type is the natural one for a caller to catch, the simdiff
error also derives from it (``ShapeError`` is a ``ValueError``, ``DTypeError``
a ``TypeError``), so ``except ValueError`` keeps working.  Every warning
derives from :class:`SimdiffWarning` (a ``UserWarning``).  All of them live
here; ``tests/test_errors_module.py`` walks the package to keep it so.
"""

from __future__ import annotations

__all__ = [
    "ArgumentOrderError",
    "AttributeNotFoundError",
    "BackendUnavailable",
    "CacheWarning",
    "CatalogueUnavailable",
    "DTypeError",
    "InputError",
    "InputTypeError",
    "InvalidIndexError",
    "LeakError",
    "MemoryBudgetError",
    "MomentWarning",
    "NeighbourListError",
    "NonFiniteError",
    "NotFoundError",
    "OptionError",
    "OutOfRangeError",
    "PrecisionWarning",
    "ProblemNotFound",
    "PropertyUnavailable",
    "ShapeError",
    "SimdiffError",
    "SimdiffWarning",
    "SolverError",
    "StabilityError",
    "StationarityWarning",
    "StoreError",
    "StructureError",
    "UnsupportedError",
    "UsageError",
]


class SimdiffError(Exception):
    """Base class of every simdiff error."""


class InputError(SimdiffError, ValueError):
    """An argument has an invalid value (non-finite data, an unknown option, a bad order, ...).

    The message names the argument, what was expected and what was got.
    """


class InputTypeError(SimdiffError, TypeError):
    """An argument has the wrong type (e.g. ``Derivatives(problem=...)`` given a function)."""


class NotFoundError(SimdiffError, KeyError):
    """A name is unknown (a catalogue problem, a stored run); the message lists the known ones.

    ``str()`` is the message itself: a plain ``KeyError`` would wrap it in quotes.
    """

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class OutOfRangeError(SimdiffError, IndexError):
    """An index is outside the valid range; the message names the index and the range."""


class LeakError(SimdiffError, RuntimeError):
    """A derivative ignores part of the problem's computation.

    The problem left the traced computation: ``float(x[i])``, ``x.item()``,
    a round trip through numpy, a Python ``if`` on an array value, or (torch)
    ``x.detach()``, ``x.data`` or ``torch.tensor(x)`` turned part of it into a
    constant.  Raised by JAX's tracer (converted), and on torch by the leak
    probe of :class:`simdiff.Derivatives` and by its leak guard at the
    leaking op; the message names the likely causes and the fix.
    """


class ShapeError(SimdiffError, ValueError):
    """An array has the wrong shape; the message names the expected and the actual shape."""


class DTypeError(SimdiffError, TypeError):
    """An array has the wrong dtype; the message names the expected and the actual dtype."""


class StructureError(ShapeError):
    """Structured parameters do not match: other keys, fields, leaf shapes or an empty tree.

    Raised where a dict, dataclass, named tuple or pytree of parameters
    (:class:`simdiff.ParamSpec`) meets one of another structure; the message
    names the leaf (``"k[1]"``, ``"w.b"``), the expected and the actual.
    """


class InvalidIndexError(OutOfRangeError):
    """An index array is out of range or repeats what must be distinct (atoms of a term, a mode
    number); the message names the index, where it occurs and the valid range."""


class MemoryBudgetError(SimdiffError, MemoryError):
    """A computation would need more memory than is available; the message states how much and
    the cheaper alternative."""


class NeighbourListError(InputError):
    """A cutoff neighbour list does not hold at a point: an atom moved more than half the skin
    from where the list was built (and the list does not follow the atoms); the message names the
    atom, its displacement and the skin."""


class NonFiniteError(SimdiffError, FloatingPointError):
    """A derivative came out NaN or infinite; it is reported, never returned as valid."""


class UnsupportedError(SimdiffError, NotImplementedError):
    """An operation or transform is not available in a context.

    The message names the operation and the context (backend) that lacks it.
    """


class PropertyUnavailable(UnsupportedError):
    """A property a problem cannot give (stress or per-atom energies of an energy that is not
    a pair potential); the message says why.

    The ASE calculator (:class:`simdiff.pes.ase_interface.SimdiffCalculator`) raises its
    subclass :class:`simdiff.pes.ase_interface.PropertyUnavailable`, which is also ASE's
    ``PropertyNotImplementedError`` (so ASE code that probes for a property sees the usual
    error).  That subclass lives beside the calculator because naming ASE's class here would
    import ``ase`` with every ``import simdiff``; ``except simdiff.errors.PropertyUnavailable``
    catches it.
    """


class BackendUnavailable(SimdiffError, ImportError):
    """A backend's framework is not installed; the message says how to install it."""


class OptionError(InputError):
    """An option has an unknown key or a bad value; the message names the accepted ones."""


class SolverError(SimdiffError, RuntimeError):
    """A numerical solver failed (step budget exhausted, step size underflow, ...)."""


class StabilityError(SimdiffError, ValueError):
    """An explicit time step exceeds the method's stability limit; the message names the limit."""


class StoreError(SimdiffError, ValueError):
    """A path is not a simdiff results store, or the store is damaged.

    The message names the path and says what to do (another path, restore a
    copy, delete a damaged segment).
    """


class ArgumentOrderError(InputTypeError):
    """Positional arguments in a retired order, e.g. ``taylor(problem, x, direction, order)``.

    The message names the present order; nothing is computed.
    """


class ProblemNotFound(SimdiffError, LookupError):
    """A catalogue name or ``module:attribute`` that names no problem; the message says why
    (the valid catalogue names, the module that does not import, the attribute it lacks)."""


class CatalogueUnavailable(SimdiffError, ImportError):
    """Neither ``simdiff.<name>`` nor the checkout's top-level ``<name>`` package imports
    (the reference catalogue ``problems`` or the ``validation`` package); the message says
    how to reinstall."""


class AttributeNotFoundError(SimdiffError, AttributeError):
    """A module or namespace has no attribute of this name (``simdiff.nope``,
    ``ops.nope``); an ``AttributeError`` too, so ``hasattr`` and ``getattr(..., default)``
    work as usual."""


class UsageError(SimdiffError, ValueError):
    """A name or option value the ``simdiff`` command cannot use; the command exits with
    status 2 and the message names the option, what was given and the valid values."""


class _Opaque(SimdiffError):
    """A value in a problem's definition whose state cannot be inspected (internal).

    Raised inside the fingerprint digest and caught there (``fingerprint`` then
    returns None); it never reaches a caller.
    """


class SimdiffWarning(UserWarning):
    """Base class of every simdiff warning."""


class CacheWarning(SimdiffWarning):
    """simdiff's compilation cache directory cannot be used; work goes on without it."""


class PrecisionWarning(SimdiffWarning):
    """An input carries less precision than the computation (e.g. float32 data, float64 maths).

    A common cause: a ``jax.Array`` created before JAX's 64-bit mode was on is
    float32; simdiff switches x64 on when its jax backend loads, which may be
    after the array was made.
    """


class StationarityWarning(SimdiffWarning):
    """An analysis that assumes a stationary point (normal modes, force constants) was asked for
    at a point whose gradient does not vanish; the message states the gradient norm."""


class MomentWarning(SimdiffWarning):
    """Taylor-expanded moments (:func:`simdiff.sensitivity.moments`) may be inaccurate: a
    neglected term is not small."""
