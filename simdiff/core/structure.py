"""Problems whose Hessian has structure the derivative API can use, and the memory budget.

A problem's ``fn`` may implement :class:`StructuredHessian`: it then knows how
to assemble its Hessian from small pieces (e.g. one block per term of a sum,
:class:`simdiff.pes.TermEnergy`) and how much memory the dense AD Hessian's
intermediates would take.  :meth:`simdiff.Derivatives.hessian` asks the
problem's ``fn`` for these capabilities; it never looks at what kind of
simulator the problem came from.
"""

from __future__ import annotations

import os
from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = ["StructuredHessian", "memory_budget"]


@runtime_checkable
class StructuredHessian(Protocol):
    """What a problem's ``fn`` provides to have its Hessian assembled from structure.

    ``structured_hessian(x, backend, dtype, check_finite=..., sparse=...,
    compile=..., expected_calls=...)``
    returns the Hessian at the points ``x`` (numpy, shape ``(n,)`` or
    ``(batch, n)``) as a numpy array of shape ``(n, n)`` or ``(batch, n, n)``,
    or with ``sparse=True`` at one point as a ``scipy.sparse.csr_array``
    (:class:`~simdiff.errors.ShapeError` for a batch); with ``check_finite``
    it raises :class:`~simdiff.errors.NonFiniteError` for a non-finite result,
    checking its pieces (``O(pieces)``) rather than the ``n^2`` output;
    ``compile`` and ``expected_calls`` (Hessians the caller will ask for, or
    ``None``) are the caller's compile policy (:class:`simdiff.Derivatives`),
    applied to the computation of the pieces;
    ``structured_cache_info(backend, dtype, compile)`` returns the
    ``cache_info()`` records of that computation (the path it ran, and why);
    ``dense_hessian_bytes(n)`` estimates the
    bytes of intermediates the dense AD Hessian (``n`` tangents pushed through
    the whole function at once) would hold.
    """

    def __call__(self, x: Any, ops: Any) -> Any: ...

    def structured_hessian(
        self,
        x: np.ndarray,
        backend: str,
        dtype: Any,
        *,
        check_finite: bool = True,
        sparse: bool = False,
        compile: bool | str = False,
        expected_calls: int | None = None,
    ) -> Any: ...

    def structured_cache_info(
        self, backend: str, dtype: Any, compile: bool | str = False
    ) -> list[dict[str, Any]]: ...

    def dense_hessian_bytes(self, n: int) -> int: ...


def memory_budget() -> int:
    """Bytes a single dense derivative computation may use: half the memory available now.

    Read from ``os.sysconf`` (physical pages available); where that is not
    available, 4 GiB.

    Examples
    --------
    >>> memory_budget() > 0
    True
    """
    try:
        pages = os.sysconf("SC_AVPHYS_PAGES")
        page = os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 4 * 2**30
    return int(pages * page) // 2
