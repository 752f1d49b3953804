"""--pool TYPES:WORKERS[:CONCURRENCY] and JOBQ_POOL as jobq-supervise reads them: each pool,
the set of pools, and the one-line refusals that name the pool at fault."""

from __future__ import annotations

import pytest

from jobq.cli.supervise import main
from jobq.pool_specs import PoolSpec, completed, conflict, parse_pool
from jobq.supervisor.config import SupervisorConfig
from jobq.worker.claim_types import ClaimTypes, every_other
from tests.support.configs import supervisor_config


def test_a_pool_names_its_types_its_workers_and_maybe_its_concurrency() -> None:
    assert parse_pool("import:4", 1000) == PoolSpec(("import",), 4)
    assert parse_pool(" email, sms :2:50", 1000) == PoolSpec(("email", "sms"), 2, 50)
    every = parse_pool("*:1", 1000)
    assert (every.types, every.name, every.spec) == ((), "*", "*:1:1")


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("import", "pool 'import': give it as TYPES:WORKERS[:CONCURRENCY]"),
        ("a:1:2:3", "pool 'a:1:2:3': give it as"),
        (":2", "pool ':2' names no job type"),
        (" , :2", "pool ' , :2' names no job type"),
        ("import:0", "pool 'import:0': workers must be at least 1, got 0"),
        ("import:two", "pool 'import:two': workers must be a whole number, got 'two'"),
        ("import:1:0", "pool 'import:1:0': concurrency must be from 1 to 1000, got 0"),
        ("import:1:1001", "pool 'import:1:1001': concurrency must be from 1 to 1000, got 1001"),
        ("import:1:x", "pool 'import:1:x': concurrency must be a whole number"),
        ("*,email:1", "pool '*,email:1': * already takes every type"),
    ],
)
def test_a_bad_pool_is_refused_naming_it(text: str, error: str) -> None:
    with pytest.raises(ValueError, match="^" + error.replace("[", r"\[").replace("*", r"\*")):
        parse_pool(text, 1000)


def test_a_type_in_two_pools_or_two_pools_of_every_other_type_is_a_conflict() -> None:
    a, ab, every = PoolSpec(("a",), 1), PoolSpec(("b", "a"), 1), PoolSpec((), 1)
    assert conflict([a, ab]) == (
        "pools 'a' and 'b,a' both name type 'a': give each type to one pool"
    )
    assert conflict([every, a, PoolSpec((), 2)]) == (
        "two pools take every other type (*): give * to one pool only"
    )
    assert conflict([a, every]) is None


def test_the_pool_of_every_other_type_leaves_the_named_types_to_their_pools() -> None:
    pools = completed([PoolSpec(("a",), 1), PoolSpec((), 2, 5), PoolSpec(("b", "c"), 1)])
    assert pools[1] == PoolSpec((), 2, 5, ("a", "b", "c"))
    # Alone, it takes every type there is, registered or not, as a supervisor always did.
    assert completed([PoolSpec((), 3)]) == (PoolSpec((), 3),)


def test_without_pool_the_type_and_worker_options_make_the_only_pool() -> None:
    config = SupervisorConfig("sqlite:///x", types=("a", "b"), workers=3, concurrency=2)
    assert config.pool_specs() == (PoolSpec(("a", "b"), 3, 2),)
    assert config.worker_settings(config.pool_specs()[0]).pool is None  # titles unchanged


def test_the_variable_gives_the_pools_separated_by_spaces(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = supervisor_config({"JOBQ_POOL": "import:4  email,sms:2:50 *:1"}, monkeypatch)
    specs = config.pool_specs()
    assert [spec.spec for spec in specs] == ["import:4:1", "email,sms:2:50", "*:1:1"]
    assert specs[2].others == ("import", "email", "sms")
    settings = config.worker_settings(specs[1])
    assert (settings.types, settings.concurrency, settings.pool) == (
        ("email", "sms"),
        50,
        "email,sms",
    )


@pytest.mark.parametrize(
    ("argv", "environment", "error"),
    [
        (
            ["--pool", "a:1", "--workers", "2", "--type", "b"],
            {},
            "--pool cannot be combined with --type, --workers: give each pool's types, "
            "workers and concurrency as --pool TYPES:WORKERS[:CONCURRENCY]",
        ),
        (["--concurrency", "2"], {"JOBQ_POOL": "a:1"}, "--pool cannot be combined with "),
        (["--pool", "a:1", "--pool", "b,a:2"], {}, "--pool: pools 'a' and 'b,a' both name"),
        (["--pool", "*:1", "--pool", "*:2"], {}, "--pool: two pools take every other type"),
        (["--pool", "a:0"], {}, "argument --pool: pool 'a:0': workers must be at least 1"),
        (["--pool", "a:1 b:1"], {}, "argument --pool: one value per --pool: repeat the flag"),
        ([], {"JOBQ_POOL": "a:1 b:0"}, "JOBQ_POOL: pool 'b:0': workers must be at least 1"),
    ],
)
def test_the_command_refuses_bad_pools_in_one_line(
    argv: list[str],
    environment: dict[str, str],
    error: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for variable, value in environment.items():
        monkeypatch.setenv(variable, value)
    with pytest.raises(SystemExit) as exited:
        main(["--dsn", "sqlite:///nowhere.db", *argv])
    assert exited.value.code == 2
    said = capsys.readouterr().err
    assert said.count("\n") == 1, said
    assert said.startswith(f"jobq-supervise: {error}"), said


def test_a_worker_of_every_other_type_is_told_the_types_the_other_pools_name() -> None:
    config = SupervisorConfig("sqlite:///x", pools=(PoolSpec(("a",), 1), PoolSpec((), 1)))
    every_other = config.worker_settings(config.pool_specs()[1])
    assert (every_other.types, every_other.others) == ((), ("a",))
    # Alone, it claims every type: there is no other pool to leave alone.
    alone = config.worker_settings(PoolSpec((), 1))
    assert (alone.types, alone.others) == ((), ())


def test_every_other_type_is_the_ready_types_less_the_other_pools() -> None:
    ready = {"import": 9.0, "loose": 1.0, "email": 0.0}
    assert every_other(ready, ("import", "sms")) == ("email", "loose")
    assert every_other(ready, ("import", "loose", "email")) == ()


def test_fixed_types_are_claimed_as_given_without_a_look_at_the_queue() -> None:
    # No queue is needed: a worker of --type, or of every type, never reads the list.
    assert ClaimTypes(("a", "b"), (), 1.0).now(None) == ("a", "b")  # type: ignore[arg-type]
    assert ClaimTypes((), (), 1.0).now(None) == ()  # type: ignore[arg-type]


def test_more_attempts_at_once_than_the_fence_table_holds_are_refused() -> None:
    pools = (PoolSpec(("a",), 5, 1000), PoolSpec(("b",), 4, 1000))
    assert SupervisorConfig("sqlite:///x", pools=pools).problems() == [
        "the workers would run 9000 attempts at once (workers x concurrency, every pool's), "
        "more than the 8192 one supervisor can fence: run fewer workers, or a second supervisor"
    ]
    assert SupervisorConfig("sqlite:///x", pools=pools[:1]).problems() == []
