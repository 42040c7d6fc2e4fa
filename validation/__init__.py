"""Scripts that run the catalogue through check and compare and reproduce the claims.

``catalogue.py`` (check, literature values, compare into a results store),
``claims.py`` (the experiments behind the claim records), ``literature.py``,
``simulators.py``; the ``bench_*.py`` scripts time single simulators.
"""
