"""jobq's benchmark: `python -m bench` (see bench/README.md).

Everything here starts its own servers on loopback, bounds every wait, and stops what it
started, also on Ctrl-C. Nothing here asserts timings: the numbers go to RESULTS.md.
"""
