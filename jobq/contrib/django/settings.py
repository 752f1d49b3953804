"""jobq's settings in a Django project, and its DSN built from DATABASES."""

from __future__ import annotations

import ipaddress
import os
from typing import Any
from urllib.parse import quote, urlencode

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS, connections

KNOWN = {"DATABASE", "DSN", "WEB_OPERATORS"}
# The group whose staff members may act on the console (retry, cancel, pause...); other staff
# see it read-only, and superusers act.
DEFAULT_OPERATORS = "jobq operators"
# Django's engines by the kind of database jobq reaches them as. PostGIS and the MySQL GIS
# engine are the same databases to jobq.
ENGINES = {
    "django.db.backends.postgresql": "postgresql",
    "django.contrib.gis.db.backends.postgis": "postgresql",
    "django.db.backends.mysql": "mysql",
    "django.contrib.gis.db.backends.mysql": "mysql",
    "django.db.backends.sqlite3": "sqlite",
    "django.contrib.gis.db.backends.spatialite": "sqlite",
}


def options() -> dict[str, Any]:
    found: Any = getattr(settings, "JOBQ", {})
    if not isinstance(found, dict):
        raise ImproperlyConfigured(f"settings.JOBQ must be a dict, got {found!r}")
    unknown = set(found) - KNOWN
    if unknown:
        raise ImproperlyConfigured(
            f"settings.JOBQ: unknown key(s) {', '.join(sorted(unknown))}; "
            f"known: {', '.join(sorted(KNOWN))}"
        )
    return found


def operators_group() -> str:
    return str(options().get("WEB_OPERATORS") or DEFAULT_OPERATORS)


def alias() -> str:
    """The database alias that holds jobq's tables."""
    name = options().get("DATABASE", DEFAULT_DB_ALIAS)
    if name not in connections:
        raise ImproperlyConfigured(f"settings.JOBQ['DATABASE'] = {name!r} is not in DATABASES")
    return str(name)


def dsn() -> str:
    """jobq's DSN: JOBQ["DSN"], else the one of JOBQ["DATABASE"] as Django connects to it
    (in tests, the test database)."""
    explicit = options().get("DSN")
    return str(explicit) if explicit else dsn_of(connections[alias()].settings_dict)


def dsn_of(database: dict[str, Any]) -> str:
    engine = database.get("ENGINE", "")
    kind = ENGINES.get(engine)
    name = str(database.get("NAME") or "")
    if kind is None:
        raise ImproperlyConfigured(
            f"jobq cannot use a database with ENGINE {engine!r}; it takes PostgreSQL, "
            "MySQL/MariaDB and SQLite, or set JOBQ['DSN']"
        )
    if kind == "sqlite":
        if not name or name == ":memory:" or name.startswith("file:"):
            raise ImproperlyConfigured(
                f"jobq's workers need an SQLite file they can open, not NAME={name!r} (in "
                "tests, set DATABASES[...]['TEST']['NAME'] to a file)"
            )
        return f"sqlite:///{os.path.abspath(name)}"
    user = quote(str(database.get("USER") or ""), safe="")
    password = database.get("PASSWORD")
    credentials = f"{user}:{quote(str(password), safe='')}@" if password else f"{user}@"
    if credentials == "@":
        credentials = ""
    host = str(database.get("HOST") or "")
    query: dict[str, str] = {}
    if host.startswith("/"):
        # A Unix socket: a directory for libpq, the socket file for PyMySQL.
        query["host" if kind == "postgresql" else "unix_socket"] = host
        host = ""
    port = f":{database['PORT']}" if database.get("PORT") else ""
    host = url_host(host)
    if kind == "postgresql":
        query.update(libpq_options(database.get("OPTIONS") or {}))
    suffix = f"?{urlencode(query)}" if query else ""
    return f"{kind}://{credentials}{host}{port}/{quote(name)}{suffix}"


def url_host(host: str) -> str:
    """HOST as a URL spells it: an IPv6 address in brackets, its zone (%eth0) quoted; a name
    or IPv4 address as it is."""
    address, _, zone = host.partition("%")
    try:
        literal = ipaddress.ip_address(address)
    except ValueError:
        return host
    if isinstance(literal, ipaddress.IPv4Address):
        return host
    return f"[{address}%25{quote(zone, safe='')}]" if zone else f"[{address}]"


def libpq_options(given: dict[str, Any]) -> dict[str, str]:
    """The OPTIONS Django hands psycopg that are libpq connection parameters (sslmode,
    sslrootcert, ...); Django's own (isolation_level, pool, ...) are not jobq's business."""
    django_own = {"isolation_level", "assume_role", "server_side_binding", "pool", "cursor_factory"}
    return {
        key: str(value)
        for key, value in given.items()
        if key not in django_own and isinstance(value, str | int)
    }
