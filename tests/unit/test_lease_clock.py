"""The lease arithmetic, with a fake clock: no deadline anyone acts on is later than the
database's lease_until minus the safety margin, and the timing rule leaves room for a round
to fail once without fencing a healthy worker."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from jobq import lease_clock
from jobq.lease_clock import FENCE_LEAD, RENEW_RETRY_PAUSE
from jobq.supervisor.config import SupervisorConfig

SETTINGS = settings(max_examples=300, deadline=None)


def test_the_kill_point_is_a_lead_before_the_safety_margin() -> None:
    assert lease_clock.kill_point(100.0, 5.0) == 100.0 - 5.0 - FENCE_LEAD
    assert lease_clock.stop_point(100.0, 5.0, 2.0) == lease_clock.kill_point(100.0, 5.0) - 2.0


def test_sigkill_follows_sigterm_after_the_grace_but_never_past_the_kill_point() -> None:
    assert lease_clock.kill_at(10.0, 2.0, None, 5.0) == 12.0
    assert lease_clock.kill_at(10.0, 2.0, 100.0, 5.0) == 12.0
    assert lease_clock.kill_at(10.0, 2.0, 16.0, 5.0) == lease_clock.kill_point(16.0, 5.0)


def test_an_extension_never_shortens_a_lease() -> None:
    assert lease_clock.extended(50.0, 10.0, 30.0) == 50.0
    assert lease_clock.extended(50.0, 30.0, 30.0) == 60.0


def test_a_failed_round_is_retried_once_then_waits_for_the_next_cycle() -> None:
    assert lease_clock.next_round(5.0, 0.0, 10.0, True, True) == (10.0, False)
    assert lease_clock.next_round(5.0, 0.0, 10.0, False, False) == (5.0 + RENEW_RETRY_PAUSE, True)
    assert lease_clock.next_round(7.0, 0.0, 10.0, False, True) == (10.0, False)
    assert lease_clock.next_round(12.0, 0.0, 10.0, False, True) == (12.0, False)


@dataclass
class Simulation:
    """The master's renewal of one lease, against a database that applies each statement
    `latency` after it was sent, on a fake clock."""

    config: SupervisorConfig
    now: float = 0.0
    expires: float = 0.0  # the master's view
    database_until: float = 0.0  # lease_until as the database has it
    cycle_start: float = 0.0
    retrying: bool = False
    next_at: float = 0.0

    def claim(self, latency: float) -> None:
        self.expires = lease_clock.anchored(self.now, self.config.lease)
        self.database_until = self.now + latency + self.config.lease
        self.next_at = self.now + self.config.renew_interval
        self.cycle_start = self.now

    def round(self, ok: bool, latency: float) -> None:
        """One round, sent at next_at: extended after `latency`, or failed (an error after
        `latency`, or a timeout: the renewer is replaced and nothing lands)."""
        config = self.config
        sent = self.now = self.next_at
        if not self.retrying:
            self.cycle_start = sent
        self.now = sent + min(latency, config.renew_timeout)
        if ok and latency < config.renew_timeout:
            self.database_until = max(self.database_until, sent + latency + config.lease)
            self.expires = lease_clock.extended(self.expires, sent, config.lease)
        else:
            ok = False
        self.next_at, self.retrying = lease_clock.next_round(
            self.now, self.cycle_start, config.renew_interval, ok, self.retrying
        )

    def kill_point(self) -> float:
        return lease_clock.kill_point(self.expires, self.config.safety_margin)

    def stop_point(self) -> float:
        config = self.config
        return lease_clock.stop_point(self.expires, config.safety_margin, config.kill_grace)


tenths = st.integers(min_value=0, max_value=100).map(lambda n: n / 10)
configs = st.builds(
    lambda interval, timeout, grace, margin, spare: SupervisorConfig(
        dsn="sqlite:///unused.sqlite3",
        renew_interval=interval,
        renew_timeout=timeout,
        kill_grace=grace,
        safety_margin=margin,
        lease=float(lease_clock.timing_budget(interval, timeout, grace, margin)) + spare,
    ),
    interval=tenths.map(lambda v: 1 + v),
    timeout=tenths.map(lambda v: 1 + v),
    grace=tenths,
    margin=tenths.map(lambda v: 1 + v),
    spare=st.sampled_from([0.01, 0.5, 10.0]),
)
rounds = st.lists(st.tuples(st.booleans(), st.floats(min_value=0, max_value=20)), max_size=40)


@SETTINGS
@given(config=configs, claim_latency=st.floats(min_value=0, max_value=5), outcomes=rounds)
def test_every_deadline_is_before_the_database_s_lease_minus_the_margin(
    config: SupervisorConfig, claim_latency: float, outcomes: list[tuple[bool, float]]
) -> None:
    assert config.problems() == []
    run = Simulation(config)
    run.claim(claim_latency)
    for ok, latency in outcomes:
        if run.next_at >= run.stop_point():
            break  # the master fences before sending: the attempt is over
        run.round(ok, latency)
        margin_end = run.database_until - config.safety_margin
        assert run.kill_point() + FENCE_LEAD <= margin_end
        assert run.stop_point() <= run.kill_point()


@SETTINGS
@given(config=configs, outcomes=rounds)
def test_a_single_failed_round_never_fences_a_healthy_worker(
    config: SupervisorConfig, outcomes: list[tuple[bool, float]]
) -> None:
    """The timing rule's point: a round that fails, followed by a retry that lands within
    the renewal timeout, keeps the lease ahead of the stop point."""
    run = Simulation(config)
    run.claim(0.0)
    failed_before = False
    for ok, latency in outcomes:
        landed = ok and latency < config.renew_timeout
        if failed_before and not landed:
            landed, latency = True, 0.0  # at most one failure in a row, in this scenario
        run.round(landed, latency)
        assert run.now < run.stop_point(), (run, config)
        failed_before = not landed
