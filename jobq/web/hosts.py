"""The hosts a request may name: the status page's defence against DNS rebinding.

A page on another site can point its own name at this machine's loopback address: the
browser then sends that page's requests here, and lets it read the answers, since to the
browser they come from the page's own origin. Only the Host header tells them apart: it
names the attacker's host. So every request must name one the page is served on.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass

# Always accepted: a rebinding needs a name the attacker controls, never one of these.
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
# A Host header: a name or IPv4 address, or an IPv6 address in brackets; then a port.
HOST_HEADER = re.compile(r"(?:\[(?P<address>[0-9a-fA-F:.]+)\]|(?P<name>[^:\[\]/@\s]+))(?::\d+)?")


def is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class AllowedHosts:
    """The host names and addresses a request may name. `any_address`: any IP address, for
    a page bound to all of the machine's (0.0.0.0 or ::): a rebinding names a host, never an
    address. `anything`: every host, when the list holds "*" (a proxy in front checks it)."""

    names: frozenset[str]
    any_address: bool = False
    anything: bool = False

    @classmethod
    def served_on(cls, bound: str, listed: Iterable[str] = ()) -> AllowedHosts:
        """Loopback names, the address the page is bound to, and the names `listed`."""
        names = {normal(name) for name in listed}
        wildcard = is_address(bound) and ipaddress.ip_address(bound).is_unspecified
        return cls(LOOPBACK_NAMES | names | {normal(bound)}, wildcard, "*" in names)

    def admit(self, header: str | None) -> bool:
        """Whether a request's Host header names one of these hosts."""
        match = HOST_HEADER.fullmatch(header or "")
        if match is None:
            return False
        host = normal(match["address"] or match["name"])
        return self.anything or host in self.names or (self.any_address and is_address(host))


def normal(host: str) -> str:
    """Lower case, without brackets or a final dot, as a Host header may write it."""
    return host.strip().lower().removeprefix("[").removesuffix("]").rstrip(".")
