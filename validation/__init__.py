"""Validation: the catalogue through check and compare, and the claims experiments (claims.py)."""
