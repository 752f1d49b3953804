"""The status page inside a Django project, behind the admin's staff login.

Staff members see it; superusers and members of the JOBQ["WEB_OPERATORS"] group ("jobq
operators" by default) may act on it, other staff see it read-only. Anonymous visitors are
sent to the admin's login page; signed-in users who are not staff are refused. Forms carry
Django's CSRF token and are checked by Django's csrf_protect, whether or not the project
has the CSRF middleware.
"""

from __future__ import annotations

import hashlib
import hmac
import io
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import urlencode

from django.conf import settings as django_settings
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import ImproperlyConfigured, PermissionDenied
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.middleware.csrf import get_token
from django.urls import NoReverseMatch, reverse
from django.views.decorators.csrf import csrf_protect
from werkzeug.wrappers import Request

from ...web.app import HOST_CSRF_KEY, StatusPage
from ...web.auth import OPERATOR, READ_ONLY, ROLE_KEY, Credentials, Csrf
from . import settings
from .producer import queue_for

# The field Django's csrf_protect reads a form's token from.
DJANGO_CSRF_FIELD = "csrfmiddlewaretoken"


# Outside ATOMIC_REQUESTS' transaction: a bulk action commits each bounded batch as it goes,
# as it does under `jobq web`, rather than holding every row it touched until the end.
@transaction.non_atomic_requests
@csrf_protect
def console(request: HttpRequest, rest: str = "") -> HttpResponse:
    """Every page of the console, at the path `rest` under the URL it is included at."""
    user: Any = getattr(request, "user", None)
    if user is None:
        raise ImproperlyConfigured(
            "The jobq console needs to know the user: add "
            "'django.contrib.auth.middleware.AuthenticationMiddleware' to MIDDLEWARE."
        )
    if not user.is_authenticated:
        return redirect_to_login(request.get_full_path(), login_url())
    if not (user.is_active and user.is_staff):
        raise PermissionDenied("The jobq console is for staff members.")
    app = StatusPage(queue_for(), read_only=False, credentials=Credentials(), csrf=Csrf(key()))
    answer = app.respond(Request(environ(request, rest, role(user))))
    return django_response(answer)


def role(user: Any) -> str:
    if user.is_superuser or user.groups.filter(name=settings.operators_group()).exists():
        return OPERATOR
    return READ_ONLY


def login_url() -> str:
    try:
        return reverse("admin:login")
    except NoReverseMatch:  # a project without the admin: its own login page
        return str(django_settings.LOGIN_URL)


def key() -> bytes:
    """The key that seals the page's notices, the same in every process of the project."""
    secret = str(django_settings.SECRET_KEY).encode("utf-8")
    return hmac.new(secret, b"jobq.contrib.django.web", hashlib.sha256).digest()


def environ(request: HttpRequest, rest: str, user_role: str) -> dict[str, Any]:
    """The WSGI environ of this request as the console's own: mounted at the URL it is
    included at (SCRIPT_NAME), with the body Django has read, the user's role and name,
    and Django's CSRF token for its forms."""
    path = "/" + rest
    full = request.path
    mount = full[: len(full) - len(path)] if full.endswith(path) else full.rstrip("/")
    # The form as Django read it (csrf_protect has: the stream is spent), sent on encoded
    # as the page's own forms are. The console takes no files.
    body = urlencode(list(request.POST.lists()), doseq=True).encode("ascii")
    base: dict[str, Any] = dict(getattr(request, "environ", None) or request.META)
    return {
        **base,
        "SCRIPT_NAME": mount,
        "PATH_INFO": path,
        "wsgi.input": io.BytesIO(body),
        "CONTENT_TYPE": "application/x-www-form-urlencoded",
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.url_scheme": request.scheme,
        "REMOTE_USER": request.user.get_username(),
        ROLE_KEY: user_role,
        HOST_CSRF_KEY: (DJANGO_CSRF_FIELD, get_token(request)),
    }


def django_response(answer: Any) -> HttpResponse:
    """The console's werkzeug response as Django's, its cookies as cookies (Django keeps one
    header of a name, and a page may set two)."""
    response = HttpResponse(answer.get_data(), status=answer.status_code)
    for name, value in answer.headers.items():
        if name.lower() == "set-cookie":
            response.cookies.load(SimpleCookie(value))
        else:
            response[name] = value
    return response
