"""Which peers a run sets up for the sections it was asked for."""

from __future__ import annotations

from .main import parse, settings_from
from .peers.pgq import Pgqueuer
from .sections import PEERS, wanted_peers


def test_the_prefetch_section_sets_up_pgqueuer_alone() -> None:
    settings = settings_from(parse(["--quick", "--only", "prefetch"]))
    assert settings.sections == {"prefetch"}
    assert wanted_peers(settings.sections) == (Pgqueuer,)
    assert wanted_peers({"prefetch", "peers"}) == PEERS
    assert wanted_peers({"iobound"}) == PEERS, "the I/O section compares with both"
    assert wanted_peers({"drain"}) == ()
