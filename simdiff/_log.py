"""The ``"simdiff"`` logger and the opt-in progress bars.

simdiff logs through the standard :mod:`logging` module under the logger
``"simdiff"`` (children ``"simdiff.<module>"``), which carries a
:class:`logging.NullHandler`: silent until the application configures logging,
e.g. ``logging.basicConfig(level=logging.INFO)``.  What is logged:

- ``INFO``: decisions the user did not make explicitly (a ``compile="auto"``
  decision and its numbers, a torch.compile failure that fell back to eager,
  a sweep resuming stored chunks, an optimiser's termination);
- ``WARNING``: a chunk of a sweep that failed and is retried;
- ``DEBUG``: every derivative callable built (a JAX trace, a torch callable)
  and every store write.

Long-running functions (``sweep``, ``dgsm``, ``moments``, ``least_squares``,
``minimize`` and the report's catalogue) take ``progress=True`` for a
:mod:`tqdm` bar on standard error; the command line shows bars when standard
error is a terminal.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable
from typing import Any

from simdiff.errors import InputTypeError

__all__ = ["ProgressCounter", "check_progress", "get_logger", "logger", "progress"]

#: The package logger; silent by default (a NullHandler, no level set).
logger = logging.getLogger("simdiff")
logger.addHandler(logging.NullHandler())


def get_logger(name: str) -> logging.Logger:
    """The child logger ``simdiff.<name>`` (``name`` without the package prefix)."""
    return logger.getChild(name.removeprefix("simdiff."))


def check_progress(progress: Any) -> bool:
    """Validate a ``progress=`` argument (a bool)."""
    if not isinstance(progress, bool):
        raise InputTypeError(f"progress must be True or False; got {progress!r}")
    return progress


def _bar(**kwargs: Any) -> Any:
    from tqdm import tqdm

    return tqdm(file=sys.stderr, leave=False, dynamic_ncols=True, **kwargs)


def progress(
    items: Iterable[Any], *, desc: str, total: int | None = None, enabled: bool = False
) -> Iterable[Any]:
    """``items``, wrapped in a progress bar when ``enabled`` (otherwise unchanged)."""
    if not check_progress(enabled):
        return items
    return _bar(iterable=items, desc=desc, total=total)


class ProgressCounter:
    """A bar advanced by hand (``update()``), for loops that simdiff does not own.

    An optimiser calls simdiff's callables; each call advances the bar by one.
    Disabled, every method is a no-op.  Use as a context manager so the bar
    closes when the loop ends or raises.
    """

    def __init__(self, *, desc: str, total: int | None = None, enabled: bool = False) -> None:
        self._bar = _bar(desc=desc, total=total) if check_progress(enabled) else None

    def update(self, n: int = 1, **postfix: Any) -> None:
        if self._bar is not None:
            if postfix:
                self._bar.set_postfix(postfix, refresh=False)
            self._bar.update(n)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> ProgressCounter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
