"""Evidence: ``check`` derivatives against references, ``compare`` the frameworks.

The public names of :mod:`simdiff.evidence._check` and :mod:`simdiff.evidence._compare`.
``simdiff.check`` and ``simdiff.compare`` are the two functions; the modules
are private so that a module and a function never share the name.
"""

from simdiff.evidence._check import DERIVATIVES as DERIVATIVES
from simdiff.evidence._check import CheckEntry as CheckEntry
from simdiff.evidence._check import CheckResult as CheckResult
from simdiff.evidence._check import check as check
from simdiff.evidence._check import rtols as rtols
from simdiff.evidence._check import tolerance as tolerance
from simdiff.evidence._check_tol import compare_arrays as compare_arrays
from simdiff.evidence._compare import CONFIGS as CONFIGS
from simdiff.evidence._compare import CompareEntry as CompareEntry
from simdiff.evidence._compare import CompareResult as CompareResult
from simdiff.evidence._compare import Task as Task
from simdiff.evidence._compare import compare as compare
from simdiff.evidence._compare import config_backend as config_backend
from simdiff.evidence._compare import register_config as register_config
from simdiff.evidence._compare import set_threads as set_threads
from simdiff.evidence._compare import thread_info as thread_info
