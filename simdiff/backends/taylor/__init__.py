"""The ``taylor`` context: univariate Taylor propagation over a base context.

``TaylorOps(base_ops, order)`` is an ``ops`` namespace whose arrays are
:class:`TaylorArray` objects carrying the truncated Taylor coefficients of
``t -> f(x + t v)``.  Running a problem once in it gives every directional
derivative up to ``order`` (``f^{(k)} = k! c_k``) at a cost polynomial in the
order (quadratic for products and the elementary functions), where nested
forward mode costs grow exponentially.

Every name in :data:`simdiff.backends.OP_NAMES` has a rule; plain arrays of
the base context mix freely with Taylor arrays (they are constants).  The
rules live by concept: :mod:`~simdiff.backends.taylor.elementwise` (arithmetic
and elementary functions), :mod:`~simdiff.backends.taylor.shape` (reductions
and shapes), :mod:`~simdiff.backends.taylor.linear` (linear algebra, FFTs and
JAX loops), :mod:`~simdiff.backends.taylor.series` (the coefficient
recurrences), on :mod:`~simdiff.backends.taylor.base` (the plumbing);
:mod:`~simdiff.backends.taylor.collapsed` is the collapsed context that sums
many directions in one pass.

References
----------
A. Griewank and A. Walther, *Evaluating Derivatives*, 2nd ed., SIAM 2008, ch. 13.
J. Bettencourt, M. J. Johnson and D. Duvenaud, "Taylor-mode automatic
differentiation for higher-order derivatives in JAX", NeurIPS workshop 2019.
"""

from simdiff.backends.taylor.array import TaylorArray as TaylorArray
from simdiff.backends.taylor.function import taylor_function as taylor_function
from simdiff.backends.taylor.ops import TaylorOps as TaylorOps

__all__ = ["TaylorArray", "TaylorOps", "taylor_function"]
