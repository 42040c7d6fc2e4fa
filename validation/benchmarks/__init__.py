"""Benchmarks and probes, run from the repository root.

``python -m validation.benchmarks.<name>``; not part of the installed package.
"""
