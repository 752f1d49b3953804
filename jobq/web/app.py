"""The status page as a WSGI application: routing, authentication, CSRF, headers, errors.

What each page shows is in views.py; this module decides whether a request gets there.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlsplit

from jinja2 import Environment, PackageLoader, StrictUndefined
from werkzeug.exceptions import Forbidden, HTTPException, MethodNotAllowed
from werkzeug.routing import Map, RequestRedirect, Rule
from werkzeug.utils import redirect
from werkzeug.wrappers import Request, Response

from ..options import ALLOWED_HOSTS
from . import views
from .auth import (
    CSRF_COOKIE,
    CSRF_FIELD,
    NOTICE_COOKIE,
    OPERATOR,
    ROLE_KEY,
    Credentials,
    Csrf,
    set_cookie,
)
from .hosts import AllowedHosts
from .views import Page

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment

    from ..queue import Queue

log = logging.getLogger("jobq.web")

# Where an application that checks every POST's CSRF token itself (Django's csrf_protect)
# puts the field name and token its check expects: the page's forms carry them instead of
# its own, which it then does not check. Set by the host's code only, as ROLE_KEY is.
HOST_CSRF_KEY = "jobq.csrf"

URLS = Map(
    [
        Rule("/", endpoint="overview", methods=["GET"]),
        Rule("/live", endpoint="overview_live", methods=["GET"]),
        Rule("/live.js", endpoint="live_script", methods=["GET"]),
        Rule("/jobs", endpoint="jobs", methods=["GET"]),
        Rule("/jobs/<int:job_id>", endpoint="job", methods=["GET"]),
        Rule("/schedules", endpoint="schedules", methods=["GET"]),
        Rule("/nodes", endpoint="nodes", methods=["GET"]),
        Rule("/queues", endpoint="queues", methods=["GET"]),
        Rule("/jobs/act", endpoint="act", methods=["POST"]),
        Rule("/jobs/<int:job_id>/retry", endpoint="retry", methods=["POST"]),
        Rule("/jobs/<int:job_id>/cancel", endpoint="cancel", methods=["POST"]),
        Rule("/pause", endpoint="pause", methods=["POST"]),
        Rule("/resume", endpoint="resume", methods=["POST"]),
        Rule("/limit", endpoint="limit", methods=["POST"]),
        Rule("/rate", endpoint="rate", methods=["POST"]),
    ]
)

# Nothing the page needs comes from elsewhere, and nothing may frame it or post it elsewhere;
# the styles and the charts are inline. The one script is the page's own file (/live.js,
# no inline script runs), and it may fetch from this page alone.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
    "script-src 'self'; connect-src 'self'; "
    "img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


@dataclasses.dataclass
class StatusPage:
    """The WSGI application. A Queue is not thread-safe, and a threaded server calls this
    from several threads: each request holds the queue alone while it uses it. `app` names
    the module whose schedules the schedules page shows, as `jobq web --app` gives it; None
    for the application the page is mounted in. `hosts`: the hosts a request may name in
    its Host header; None where the application the page is mounted in checks them."""

    queue: Queue
    read_only: bool
    credentials: Credentials
    csrf: Csrf
    reopen: Callable[[], Queue] | None = None
    app: str | None = None
    hosts: AllowedHosts | None = None
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock, init=False)
    templates: Environment = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        self.templates = environment()

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        response = self.respond(Request(environ))
        return response(environ, start_response)

    def respond(self, request: Request) -> Response:
        if self.hosts is not None and not self.hosts.admit(request.headers.get("Host")):
            # Before anything else: after a DNS rebinding, the browser would let the page
            # that named this host read the answer and post forms that pass the Origin check.
            response = Response(
                "The Host header names a host this page is not served on: add the name "
                f"browsers use to --allowed-host ({ALLOWED_HOSTS.variable}).\n",
                400,
                mimetype="text/plain",
            )
            response.headers.update(SECURITY_HEADERS)
            return response
        role = self.credentials.admit(request.headers.get("Authorization"))
        if role is None:
            response = Response("Authentication required\n", 401, mimetype="text/plain")
            response.headers["WWW-Authenticate"] = self.credentials.challenge
            return response
        # The stricter of what the credentials and the host application say.
        read_only = (
            self.read_only
            or role != OPERATOR
            or request.environ.get(ROLE_KEY, OPERATOR) != OPERATOR
        )
        nonce = request.cookies.get(CSRF_COOKIE) or self.csrf.new_nonce()
        adapter = URLS.bind_to_environ(request.environ)
        host_csrf = request.environ.get(HOST_CSRF_KEY)
        page = Page(
            queue=self.queue,
            request=request,
            urls=adapter,
            templates=self.templates,
            read_only=read_only,
            csrf_field=host_csrf[0] if host_csrf else CSRF_FIELD,
            csrf_token=host_csrf[1] if host_csrf else self.csrf.token(nonce),
            app=self.app,
            seal=functools.partial(self.csrf.seal, nonce),
        )
        try:
            endpoint, arguments = adapter.match()
            # The notice an action left for this page, if this is the page it was left for.
            address = adapter.build(endpoint, arguments)
            notice = self.csrf.unseal(nonce, address, request.cookies.get(NOTICE_COOKIE))
            page = dataclasses.replace(page, notice=notice)
            if request.method == "POST":
                self.check_post(request, read_only, checked=host_csrf is not None)
            with self.lock:
                response = self.view(str(endpoint), page, arguments)
        except RequestRedirect as moved:
            response = moved_to(moved)
        except HTTPException as error:
            response = page.error(error)
        except Exception:
            # The message may quote the database, its host or worse: it goes to the log only.
            log.exception("the status page failed on %s %s", request.method, request.path)
            response = page.failure()
        if request.cookies.get(CSRF_COOKIE) != nonce:
            set_cookie(response, request, CSRF_COOKIE, nonce)
        if NOTICE_COOKIE in request.cookies and "Location" not in response.headers:
            # Said once, by the page it was left for, or dropped by whichever came instead.
            response.delete_cookie(NOTICE_COOKIE, path=request.script_root or "/")
        response.headers.update(SECURITY_HEADERS)
        return response

    def view(self, endpoint: str, page: Page, arguments: Mapping[str, Any]) -> Response:
        """The view's answer. Should it fail where the app knows how to reopen its queue,
        the queue is replaced, since its connection may be what broke (a restarted database,
        a failover), and a GET is answered once more on the new one. A POST is not sent
        again: it may have been applied before its answer was lost."""
        run = getattr(views, endpoint)
        try:
            return cast(Response, run(page, **arguments))
        except HTTPException:
            raise
        except Exception:
            if self.reopen is None:
                raise
            log.warning("The status page's query failed: opening a new connection", exc_info=True)
            with contextlib.suppress(Exception):
                self.queue.close()
            self.queue = self.reopen()
            if page.request.method != "GET":
                raise
            return cast(Response, run(dataclasses.replace(page, queue=self.queue), **arguments))

    def check_post(self, request: Request, read_only: bool, checked: bool) -> None:
        """Refuse a POST the role may not send, or that another site made. checked: the
        host application has checked the form's CSRF token itself (HOST_CSRF_KEY)."""
        if read_only:
            raise MethodNotAllowed(valid_methods=["GET"], description="This page is read-only.")
        if not checked and not self.csrf.valid(
            request.cookies.get(CSRF_COOKIE), request.form.get(CSRF_FIELD)
        ):
            raise Forbidden(
                "The form was not sent from this status page, or it is older than the page's "
                "cookie: reload the page and try again."
            )
        # The host only, not the scheme: behind a TLS proxy the browser says https and the
        # request arrives as http.
        origin = request.headers.get("Origin")
        if origin and urlsplit(origin).netloc != request.host:
            raise Forbidden(f"A form from {origin} may not act on this page.")


@functools.cache
def environment() -> Environment:
    """The pages' templates, compiled once for every app in this process: an application
    that mounts the page may make an app per request, on that request's connection."""
    templates = Environment(
        loader=PackageLoader("jobq.web"), autoescape=True, undefined=StrictUndefined
    )
    views.add_filters(templates)
    return templates


def moved_to(moved: RequestRedirect) -> Response:
    """The redirect to a page's own address (/jobs//1 is /jobs/1: the router merges slashes),
    by path: the absolute address the router built names the scheme and host this server
    sees, which behind a TLS proxy are not the browser's."""
    target = urlsplit(moved.new_url)
    return redirect(target.path + (f"?{target.query}" if target.query else ""), moved.code)


def make_app(
    queue: Queue,
    read_only: bool = False,
    *,
    credentials: Credentials | None = None,
    csrf_key: bytes | None = None,
    reopen: Callable[[], Queue] | None = None,
    allowed_hosts: Iterable[str] | None = None,
) -> StatusPage:
    """The status page as a WSGI application on `queue`.

    credentials: who may see it; by default read from JOBQ_WEB_USER and JOBQ_WEB_PASSWORD
    (HTTP basic) or JOBQ_WEB_TOKEN (bearer), and open to all when none is set. csrf_key signs
    the forms; by default JOBQ_WEB_SECRET, else a random key of this app's own. reopen: how
    to open a fresh queue once a query has failed (`jobq web` reconnects so); without it, an
    application that mounts the page keeps its connection healthy itself. allowed_hosts:
    the host names a request's Host header may give, beside loopback names ("*" for any);
    by default every one, for the application the page is mounted in checks them (Django's
    ALLOWED_HOSTS).
    """
    return StatusPage(
        queue,
        read_only,
        Credentials.from_environment() if credentials is None else credentials,
        Csrf(csrf_key),
        reopen,
        hosts=None if allowed_hosts is None else AllowedHosts.served_on("localhost", allowed_hosts),
    )
