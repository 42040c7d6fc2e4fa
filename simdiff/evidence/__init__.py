"""Evidence: ``check`` derivatives against references, ``compare`` the frameworks.

The public names of :mod:`simdiff.evidence.check.run` and :mod:`simdiff.evidence.compare.run`.
``simdiff.check`` and ``simdiff.compare`` are the two functions; the modules
are private so that a module and a function never share the name.
"""

from simdiff.evidence.check import DERIVATIVES as DERIVATIVES
from simdiff.evidence.check import CheckEntry as CheckEntry
from simdiff.evidence.check import CheckResult as CheckResult
from simdiff.evidence.check import check as check
from simdiff.evidence.check import compare_arrays as compare_arrays
from simdiff.evidence.check import rtols as rtols
from simdiff.evidence.check import tolerance as tolerance
from simdiff.evidence.compare import CONFIGS as CONFIGS
from simdiff.evidence.compare import CompareEntry as CompareEntry
from simdiff.evidence.compare import CompareResult as CompareResult
from simdiff.evidence.compare import Task as Task
from simdiff.evidence.compare import compare as compare
from simdiff.evidence.compare import config_backend as config_backend
from simdiff.evidence.compare import register_config as register_config
from simdiff.evidence.compare import set_threads as set_threads
from simdiff.evidence.compare import thread_info as thread_info
