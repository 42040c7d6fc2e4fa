"""``simdiff.check``: every derivative on every backend against independent references.

:mod:`~simdiff.evidence.check.run` holds :func:`check` and its result types,
:mod:`~simdiff.evidence.check.tolerance` the comparison rule,
:mod:`~simdiff.evidence.check.fd` the finite-difference references and
:mod:`~simdiff.evidence.check.plans` which derivative is checked against which
reference.  :mod:`simdiff.evidence` re-exports the public names, so
``simdiff.evidence.check`` (and ``simdiff.check``) is the function; import the
modules with ``from simdiff.evidence.check.run import ...``.
"""

from simdiff.evidence.check.run import DERIVATIVES as DERIVATIVES
from simdiff.evidence.check.run import CheckEntry as CheckEntry
from simdiff.evidence.check.run import CheckResult as CheckResult
from simdiff.evidence.check.run import check as check
from simdiff.evidence.check.run import rtols as rtols
from simdiff.evidence.check.run import tolerance as tolerance
from simdiff.evidence.check.tolerance import compare_arrays as compare_arrays
