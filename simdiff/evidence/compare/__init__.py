"""``simdiff.compare``: the same derivatives under several configurations, timed side by side.

:mod:`~simdiff.evidence.compare.run` holds :func:`compare` (the timing
protocol), :mod:`~simdiff.evidence.compare.configs` the configurations and
tasks, :mod:`~simdiff.evidence.compare.result` the result types.
:mod:`simdiff.evidence` re-exports the public names, so
``simdiff.evidence.compare`` (and ``simdiff.compare``) is the function; import
the modules with ``from simdiff.evidence.compare.run import ...``.
"""

from simdiff.evidence.compare.run import CONFIGS as CONFIGS
from simdiff.evidence.compare.run import CompareEntry as CompareEntry
from simdiff.evidence.compare.run import CompareResult as CompareResult
from simdiff.evidence.compare.run import Task as Task
from simdiff.evidence.compare.run import compare as compare
from simdiff.evidence.compare.run import config_backend as config_backend
from simdiff.evidence.compare.run import make_task as make_task
from simdiff.evidence.compare.run import register_config as register_config
from simdiff.evidence.compare.run import set_threads as set_threads
from simdiff.evidence.compare.run import thread_info as thread_info
