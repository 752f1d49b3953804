"""Importing the application whose Job classes a worker runs.

Only processes that run jobs import it: each worker after its fork, and `jobq work`. The
supervisor's master never does (see supervisor/appcheck.py), so nothing the application opens
at import, a connection, a pool, an ORM session, is ever shared between processes.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys

from . import hooks
from .dsn import withhold_secrets
from .errors import ConfigurationError

# A Django project names its settings here; its modules cannot be imported before setup().
DJANGO_SETTINGS = "DJANGO_SETTINGS_MODULE"


def import_app(module: str | None) -> None:
    if not module:
        return
    # An application usually lives in the working directory, as it does for `python -m`.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        importlib.import_module(module)
    except ImportError as error:
        raise ConfigurationError(
            f"cannot import --app {module!r}: {why_not(module, error)}"
        ) from error
    except Exception as error:
        # Django's ImproperlyConfigured or AppRegistryNotReady: a project imported unset up.
        if type(error).__module__.startswith("django.") and not os.environ.get(DJANGO_SETTINGS):
            raise ConfigurationError(
                f"cannot import --app {module!r}: {error} (a Django project's modules need "
                f"{DJANGO_SETTINGS} set, or run `manage.py jobq supervise`)"
            ) from error
        raise


def why_not(module: str, error: ImportError) -> str:
    """Why the application did not import. When the module itself (or its package) is what
    is missing, say where it was looked for: a first run is often from another directory."""
    missing = getattr(error, "name", None)
    if not isinstance(error, ModuleNotFoundError) or missing is None:
        return str(error)
    if module != missing and not module.startswith(missing + "."):
        return str(error)  # the application was found, and one of its own imports failed
    return (
        f"no module named {missing!r} in the working directory ({os.getcwd()}) or on "
        "PYTHONPATH: run from the project's root, or set PYTHONPATH to it"
    )


def load_app(module: str | None) -> None:
    """What a process does before it runs jobs: set Django up when the environment names a
    Django project (its models cannot be imported before), then import the application."""
    if os.environ.get(DJANGO_SETTINGS) and importlib.util.find_spec("django") is not None:
        setup_django()
    import_app(module)


def start_worker(module: str | None) -> None:
    """In a process about to run jobs: load the application, run its on_worker_start hooks,
    then withhold jobq's secrets from the jobs' subprocesses. Raises what the hooks raise:
    such a worker cannot start."""
    load_app(module)
    hooks.worker_started()
    withhold_secrets()


def setup_django() -> None:
    """django.setup(), which imports INSTALLED_APPS; with jobq.contrib.django among them, that
    also imports every app's jobs module and registers the per-job connection hooks."""
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    import django
    from django.core.exceptions import ImproperlyConfigured

    try:
        django.setup()
    except (ImportError, ImproperlyConfigured) as error:
        raise ConfigurationError(
            f"cannot set up Django ({DJANGO_SETTINGS}={os.environ.get(DJANGO_SETTINGS)}): {error}"
        ) from error
