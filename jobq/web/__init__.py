"""jobq's status page: see and act on jobs from a browser (`jobq web`, or mounted in an app).

    from jobq.web import make_app
    application = make_app(jobq.Queue.connect(dsn), read_only=False)

Needs the `web` extra: pip install 'jobq[web]'.
"""

from .app import make_app
from .auth import Credentials

__all__ = ["Credentials", "make_app"]
