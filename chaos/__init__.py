"""Chaos for jobq: fault injection, and a soak that proves the promise under it.

`python -m chaos` (or `make chaos`) runs the soak; see chaos/soak.py.
"""
