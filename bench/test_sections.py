"""Which peers a run sets up for the sections it was asked for."""

from __future__ import annotations

from .main import parse, settings_from
from .measures.profiling import profiled_cmd
from .peers.pgq import Pgqueuer
from .sections import PEERS, wanted_peers


def test_the_prefetch_section_sets_up_pgqueuer_alone() -> None:
    settings = settings_from(parse(["--quick", "--only", "prefetch"]))
    assert settings.sections == {"prefetch"}
    assert wanted_peers(settings.sections) == (Pgqueuer,)
    assert wanted_peers({"prefetch", "peers"}) == PEERS
    assert wanted_peers({"iobound"}) == PEERS, "the I/O section compares with both"
    assert wanted_peers({"drain"}) == ()


def test_the_profile_runs_the_prefetch_asked_for() -> None:
    default = settings_from(parse(["--only", "profile"]))
    assert default.profile_prefetch is None
    assert "--prefetch" not in profiled_cmd("postgresql:///x", 8, default.profile_prefetch)
    one = settings_from(parse(["--only", "profile", "--profile-prefetch", "1"]))
    cmd = profiled_cmd("postgresql:///x", 8, one.profile_prefetch)
    assert cmd[cmd.index("--prefetch") + 1] == "1"
    assert cmd[cmd.index("--workers") + 1] == "8"
