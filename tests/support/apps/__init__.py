"""The applications the tests' workers import with --app, and the programs their jobs start.

Workers load each module by its bare name (`--app supervised_app`) with this folder on their
PYTHONPATH, while the tests import them as `tests.support.apps.<name>`; every job class sets
its job_name, so both register under the same name.
"""

from pathlib import Path

# What a test puts on its workers' PYTHONPATH.
APPS = Path(__file__).resolve().parent
