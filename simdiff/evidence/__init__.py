"""Evidence: ``check`` derivatives against references, ``compare`` the frameworks.

The public names of :mod:`simdiff.evidence._check` and :mod:`simdiff.evidence._compare`.
``simdiff.check`` and ``simdiff.compare`` are the two functions; the modules
are private so that a module and a function never share the name.
"""

from ._check import DERIVATIVES as DERIVATIVES
from ._check import CheckEntry as CheckEntry
from ._check import CheckResult as CheckResult
from ._check import check as check
from ._check import rtols as rtols
from ._check import tolerance as tolerance
from ._check_tol import compare_arrays as compare_arrays
from ._compare import CONFIGS as CONFIGS
from ._compare import CompareEntry as CompareEntry
from ._compare import CompareResult as CompareResult
from ._compare import Task as Task
from ._compare import compare as compare
from ._compare import config_backend as config_backend
from ._compare import register_config as register_config
from ._compare import set_threads as set_threads
from ._compare import thread_info as thread_info
