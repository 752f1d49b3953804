"""Who may see the page, and proof that a form was posted from it.

Authentication is HTTP basic or a bearer token, its secret read from the environment, never
from a flag (a flag shows in `ps`). Each is given for one of two roles: the operator, who may
act (retry, cancel, pause...), and the read-only role, who sees every page and may post nothing.
A host framework that mounts the page behind its own login may leave them all unset, and say
which role its user has in the WSGI environ (ROLE_KEY).

CSRF protection is a signed double-submit token: a random value in a SameSite=Strict cookie,
and its HMAC under the app's key in every form. A forged cross-site POST carries no cookie, and
a page elsewhere cannot read the cookie to compute the form's half.

What an action did is said by the page its redirect leads to, in a notice the action wrote:
sealed under the same key, for this browser's cookie and that one page, and carried in a
cookie of its own. Nothing in an address can put words in it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass

from werkzeug.wrappers import Request, Response

from ..errors import ConfigurationError

USER_VARIABLE = "JOBQ_WEB_USER"
PASSWORD_VARIABLE = "JOBQ_WEB_PASSWORD"
TOKEN_VARIABLE = "JOBQ_WEB_TOKEN"
READ_ONLY_USER_VARIABLE = "JOBQ_WEB_READ_ONLY_USER"
READ_ONLY_PASSWORD_VARIABLE = "JOBQ_WEB_READ_ONLY_PASSWORD"
READ_ONLY_TOKEN_VARIABLE = "JOBQ_WEB_READ_ONLY_TOKEN"
# Signs the CSRF tokens. Each app makes its own key unless this is set: set it when several
# processes serve the page, so that a form from one is accepted by the others.
SECRET_VARIABLE = "JOBQ_WEB_SECRET"

CSRF_COOKIE = "jobq_csrf"
CSRF_FIELD = "csrf"
NOTICE_COOKIE = "jobq_notice"

OPERATOR = "operator"
READ_ONLY = "read-only"
# Where an application that mounts the page behind its own login puts its user's role
# (OPERATOR or READ_ONLY; anything else reads as READ_ONLY). A client cannot set a WSGI
# environ key: its headers arrive as HTTP_* keys.
ROLE_KEY = "jobq.role"


@dataclass(frozen=True)
class Credentials:
    """What a request must present, for each role; nothing when none is set. user, password
    and token are the operator's; read_only_* the read-only role's."""

    user: str | None = None
    password: str | None = None
    token: str | None = None
    read_only_user: str | None = None
    read_only_password: str | None = None
    read_only_token: str | None = None

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] = os.environ) -> Credentials:
        user, password = pair(environ, USER_VARIABLE, PASSWORD_VARIABLE)
        viewer, viewer_password = pair(
            environ, READ_ONLY_USER_VARIABLE, READ_ONLY_PASSWORD_VARIABLE
        )
        token = environ.get(TOKEN_VARIABLE) or None
        read_only_token = environ.get(READ_ONLY_TOKEN_VARIABLE) or None
        if token is not None and token == read_only_token:
            raise ConfigurationError(
                f"{TOKEN_VARIABLE} and {READ_ONLY_TOKEN_VARIABLE} are the same token: give "
                "each role a token of its own"
            )
        return cls(user, password, token, viewer, viewer_password, read_only_token)

    @property
    def configured(self) -> bool:
        return any(
            secret is not None
            for secret in (
                self.password,
                self.token,
                self.read_only_password,
                self.read_only_token,
            )
        )

    @property
    def challenge(self) -> str:
        """The WWW-Authenticate header of a refusal."""
        basic = self.password is not None or self.read_only_password is not None
        return 'Basic realm="jobq", charset="UTF-8"' if basic else "Bearer"

    def admit(self, authorization: str | None) -> str | None:
        """The role an Authorization header's secret gives (OPERATOR or READ_ONLY), None for
        none; everyone is an operator where no secret is set."""
        if not self.configured:
            return OPERATOR
        # Both roles' secrets compared, always: which one was given must not show in timing.
        operator = matches(authorization, self.user, self.password, self.token)
        viewer = matches(
            authorization, self.read_only_user, self.read_only_password, self.read_only_token
        )
        if operator:
            return OPERATOR
        return READ_ONLY if viewer else None


def pair(
    environ: Mapping[str, str], user_name: str, password_name: str
) -> tuple[str | None, str | None]:
    """A user and password from the environment: both set, or neither."""
    user = environ.get(user_name) or None
    password = environ.get(password_name) or None
    if (user is None) != (password is None):
        given, missing = (user_name, password_name) if user else (password_name, user_name)
        raise ConfigurationError(f"{given} is set but {missing} is not: set both or neither")
    return user, password


def matches(
    authorization: str | None, user: str | None, password: str | None, token: str | None
) -> bool:
    """Whether an Authorization header carries this token, or this user and password."""
    scheme, _, value = (authorization or "").partition(" ")
    scheme, value = scheme.lower(), value.strip()
    if scheme == "bearer" and token is not None:
        return same(value, token)
    if scheme == "basic" and password is not None:
        try:
            given = base64.b64decode(value, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return False
        name, _, secret = given.partition(":")
        # Both compared, always: which one was wrong must not show in the timing.
        return same(name, user or "") & same(secret, password)
    return False


def same(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))


class Csrf:
    """Makes and checks the form tokens for one app."""

    def __init__(self, key: bytes | None = None) -> None:
        configured = os.environ.get(SECRET_VARIABLE)
        self.key = key or (configured.encode("utf-8") if configured else secrets.token_bytes(32))

    @staticmethod
    def new_nonce() -> str:
        return secrets.token_urlsafe(24)

    def token(self, nonce: str) -> str:
        return hmac.new(self.key, nonce.encode("ascii", "replace"), hashlib.sha256).hexdigest()

    def valid(self, nonce: str | None, token: str | None) -> bool:
        if not nonce or not token:
            return False
        return same(token, self.token(nonce))

    def seal(self, nonce: str, page: str, notice: str) -> str:
        """A notice for the page at address `page`, as a cookie's value that only this key
        makes for this browser's nonce."""
        body = base64.urlsafe_b64encode(notice.encode("utf-8")).decode("ascii")
        return f"{body}.{self.notice_mac(nonce, page, body)}"

    def unseal(self, nonce: str, page: str, sealed: str | None) -> str | None:
        """The notice sealed for this nonce and page; None for any other value."""
        body, _, mac = (sealed or "").partition(".")
        if not body or not same(mac, self.notice_mac(nonce, page, body)):
            return None
        try:
            return base64.urlsafe_b64decode(body).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None

    def notice_mac(self, nonce: str, page: str, body: str) -> str:
        # Prefixed, so that no notice's MAC is ever a form's token.
        message = "\0".join(("notice", nonce, page, body)).encode("utf-8", "replace")
        return hmac.new(self.key, message, hashlib.sha256).hexdigest()


def set_cookie(response: Response, request: Request, name: str, value: str) -> None:
    """A cookie for the page's own path, out of scripts' and other sites' reach."""
    response.set_cookie(
        name,
        value,
        path=request.script_root or "/",
        httponly=True,
        samesite="Strict",
        secure=request.is_secure,
    )
