"""Workers: the supervised child (claims jobs, reports them to its master, runs them) and
the plain single-process worker behind `jobq work` (plain.py)."""
