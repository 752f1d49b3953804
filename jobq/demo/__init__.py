"""`jobq demo`: scenarios that show, with real processes, what jobq does and why.

`lease` (lease.py) runs one job longer than its lease without renewal and then with it; the
demo's processes are in processes.py and the watching of each phase in watch.py.
"""

from .lease import SCENARIOS, BuildReport, run_demo

__all__ = ["SCENARIOS", "BuildReport", "run_demo"]
