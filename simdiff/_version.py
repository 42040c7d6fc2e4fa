"""The package version, in one place: :mod:`simdiff` and :mod:`simdiff.environment` read it here.

pyproject.toml's ``version`` is the same string (tests/test_layers.py checks it).
"""

__version__ = "0.1.0"
