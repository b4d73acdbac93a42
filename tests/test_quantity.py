"""Sizes read as their runtime reads them: Kubernetes quantities and Docker sizes.

The Kubernetes table is written from the grammar of k8s.io/apimachinery pkg/api/resource/quantity.go
and the cases of its quantity_test.go (TestQuantityParse: valid, "things that saturate/round", the
invalid list); the Docker table from github.com/docker/go-units size.go (RAMInBytes). The reader
tests then check that a manifest's memory, requests and /dev/shm sizeLimit go through them, that a
compose file keeps Docker's units, and that a size its runtime refuses is a note, never a number.
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from vllm_caching_mcp.advice.deployment import Document, parse_documents
from vllm_caching_mcp.advice.deployment.model import Workload
from vllm_caching_mcp.advice.deployment.quantity import docker_bytes, parse_quantity, quantity_bytes
from vllm_caching_mcp.knowledge import Knowledge, load_knowledge

Ki, Mi, Gi, Ti, Pi, Ei = (2**n for n in (10, 20, 30, 40, 50, 60))

# (input, exact value): quantity_test.go TestQuantityParse
VALID = [
    ("0", 0), ("0n", 0), ("0u", 0), ("0m", 0), ("0Ki", 0), ("0k", 0), ("0Mi", 0), ("0M", 0),
    ("0Gi", 0), ("0G", 0), ("0Ti", 0), ("0T", 0), ("1", 1),
    ("1Ki", Ki), ("8Ki", 8 * Ki), ("7Mi", 7 * Mi), ("6Gi", 6 * Gi), ("5Ti", 5 * Ti), ("4Pi", 4 * Pi),
    ("3Ei", 3 * Ei), ("10Ti", 10 * Ti), ("100Ti", 100 * Ti),
    ("5n", Decimal("5e-9")), ("4u", Decimal("4e-6")), ("3m", Decimal("0.003")), ("9", 9), ("8k", 8000),
    ("50k", 50_000), ("7M", 7 * 10**6), ("6G", 6 * 10**9), ("5T", 5 * 10**12), ("40T", 4 * 10**13),
    ("300T", 3 * 10**14), ("2P", 2 * 10**15), ("1E", 10**18),
    ("1E-3", Decimal("0.001")), ("1e3", 1000), ("1E6", 10**6), ("1e9", 10**9), ("1E12", 10**12),
    ("1e15", 10**15), ("1E18", 10**18), ("1e14", 10**14), ("1e13", 10**13), ("100.035k", 100_035),
    ("0.001", Decimal("0.001")), ("0.0005k", Decimal("0.5")), ("0.005", Decimal("0.005")),
    ("0.5", Decimal("0.5")), ("0.00050k", Decimal("0.5")), ("0.50000", Decimal("0.5")),
    ("0.5e0", Decimal("0.5")), ("0.5e-1", Decimal("0.05")), ("0.5e-2", Decimal("0.005")),
    ("10.035M", 10_035_000), ("1.2e3", 1200), ("1.3E+6", 1_300_000), ("1.40e9", 1_400_000_000),
    ("1.53E12", 153 * 10**10), ("1.6e15", 16 * 10**14), ("1.7E18", 17 * 10**17), ("9.01", Decimal("9.01")),
    ("8.1k", 8100), ("7.123456M", 7_123_456), ("6.987654321G", 6_987_654_321), ("5.444T", 5444 * 10**9),
    ("40.1T", 401 * 10**11), ("300.2T", 3002 * 10**11), ("2.5P", 25 * 10**14), ("1.01E", 101 * 10**16),
    # things that saturate or round: nano precision rounds up, int64 is the ceiling
    ("3.001n", Decimal("4e-9")), ("1.1E-9", Decimal("2e-9")), ("0.0000000001", Decimal("1e-9")),
    ("0.0000000005", Decimal("1e-9")), ("0.5e-9", Decimal("1e-9")), ("0.9n", Decimal("1e-9")),
    ("0.00000012345", Decimal("124e-9")), ("9Ei", 2**63 - 1), ("9223372036854775807Ki", 2**63 - 1),
    ("12E", 12 * 10**18),
    ("100.035Ki", Decimal("102435.84")), ("0.5Mi", Mi // 2), ("0.05Gi", Decimal("53687091.2")),
    ("0.025Ti", Decimal("27487790694.4")),
    # written by trolls
    ("0.000000000001Ki", Decimal("2e-9")), (".001", Decimal("0.001")), (".0001k", Decimal("0.1")),
    ("1.", 1), ("1.G", 10**9),
]  # fmt: skip
INVALID = ["", "1.1.M", "1+1.0M", "0.1mi", "0.1am", "aoeu", ".5i", "1i", "-3.01i", "-3.01e-", " 1", "1 "]
INVALID += ["200GB", "1.5.5", "64g", "8GiB", "1K", "1e3.5", "0x10", "1_000", "1e", "--1"]


@pytest.mark.parametrize(("text", "value"), VALID, ids=[t for t, _ in VALID])
def test_a_quantity_has_the_value_kubernetes_gives_it(text: str, value: int | Decimal) -> None:
    assert parse_quantity(text) == value
    assert parse_quantity("+" + text) == value  # quantity_test.go: every case with an explicit sign
    assert parse_quantity("-" + text) == -value


@pytest.mark.parametrize("text", INVALID)
def test_what_kubernetes_refuses_is_refused_with_its_value_named(text: str) -> None:
    with pytest.raises(ValueError, match="is not a Kubernetes quantity") as raised:
        parse_quantity(text)
    assert repr(text) in str(raised.value)


@pytest.mark.parametrize(
    ("text", "size"),
    [("400000m", 400), ("1500m", 2), ("1e3", 1000), ("1Ei", Ei), ("64Gi", 64 * Gi), ("0.5Gi", Gi // 2), ("1n", 1)],
)
def test_a_memory_size_is_whole_bytes_rounded_up(text: str, size: int) -> None:
    assert quantity_bytes(text) == size


def test_a_negative_memory_size_is_refused() -> None:
    with pytest.raises(ValueError, match="'-1Gi' is negative"):
        quantity_bytes("-1Gi")


# go-units RAMInBytes: binary, case-insensitive, optional b or ib, one optional space, truncated.
DOCKER = [
    ("64g", 64 * Gi), ("64G", 64 * Gi), ("64gb", 64 * Gi), ("64GiB", 64 * Gi), ("512m", 512 * Mi),
    ("1.5g", 3 * Gi // 2), ("1.5 g", 3 * Gi // 2), ("100", 100), ("100b", 100), ("2k", 2048),
    ("1t", Ti), ("1p", Pi), ("0.5", 0), (".5k", 512),
]  # fmt: skip
DOCKER_INVALID = ["64Gi", "1.5.5", "-1g", "1e", "1x", "64 gb b", "g", "1m b", "64  g", "64gbb"]


@pytest.mark.parametrize(("text", "size"), DOCKER, ids=[t for t, _ in DOCKER])
def test_a_docker_size_has_the_bytes_docker_gives_it(text: str, size: int) -> None:
    assert docker_bytes(text) == size


@pytest.mark.parametrize("text", DOCKER_INVALID)
def test_what_docker_refuses_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="is not a Docker size"):
        docker_bytes(text)


# -- the readers use them ----------------------------------------------------------------------

POD = """\
apiVersion: apps/v1
kind: Deployment
metadata: {{name: x}}
spec:
  template:
    spec:
      containers:
      - name: c
        image: vllm/vllm-openai:v0.33.0
        args: [--model, m]
        resources: {{limits: {{memory: "{limit}"}}, requests: {{memory: "{request}", nvidia.com/gpu: "{gpus}"}}}}
        volumeMounts: [{{name: shm, mountPath: /dev/shm}}]
      volumes: [{{name: shm, emptyDir: {{medium: Memory, sizeLimit: "{shm}"}}}}]
"""


@pytest.fixture(scope="module")
def knowledge() -> Knowledge:
    return load_knowledge()


def read(knowledge: Knowledge, name: str, text: str) -> tuple[Workload, list[str]]:
    deployment = parse_documents([Document(name=name, text=text)], knowledge)
    (workload,) = deployment.workloads
    return workload, deployment.notes


def test_a_manifest_reads_its_sizes_as_kubernetes_does(knowledge: Knowledge) -> None:
    text = POD.format(limit="400000m", request="1e3", shm="1Ei", gpus="1e1")
    w, notes = read(knowledge, "deploy.yaml", text)
    assert w.memory_limit_gib < 1e-6  # 400 bytes, not 400,000 MiB
    assert w.memory_request_gib < 1e-5
    assert w.shm_gib == Ei / Gi
    assert w.gpu_count == 10
    assert not [n for n in notes if "quantity" in n], notes


@pytest.mark.parametrize(
    ("field", "values"),
    [
        ("resources.limits.memory", {"limit": "200GB"}),
        ("resources.requests.memory", {"request": "1.5.5"}),
        ("emptyDir.sizeLimit", {"shm": "64g"}),
    ],
)
def test_a_size_kubernetes_refuses_is_a_note_naming_the_field(
    knowledge: Knowledge, field: str, values: dict[str, str]
) -> None:
    given = {"limit": "64Gi", "request": "64Gi", "shm": "8Gi", "gpus": "1"} | values
    w, notes = read(knowledge, "deploy.yaml", POD.format(**given))
    (value,) = values.values()
    (note,) = [n for n in notes if "quantity" in n]
    assert f"{field} {value!r} is not a Kubernetes quantity" in note and note.endswith("it is not used")
    attribute = {"limit": "memory_limit_gib", "request": "memory_request_gib", "shm": "shm_gib"}[next(iter(values))]
    assert getattr(w, attribute) is None


def test_a_compose_file_keeps_dockers_units_and_names_a_bad_size(knowledge: Knowledge) -> None:
    service = "services:\n  vllm:\n    image: vllm/vllm-openai:v0.33.0\n    command: [--model, m]\n"
    w, notes = read(knowledge, "compose.yaml", service + "    mem_limit: 64g\n    shm_size: 1.5gb\n")
    assert (w.memory_limit_gib, w.shm_gib) == (64, 1.5)
    assert not [n for n in notes if "size" in n], notes
    w, notes = read(knowledge, "compose.yaml", service + "    mem_limit: 64Gi\n")
    assert w.memory_limit_gib is None
    assert any("mem_limit '64Gi' is not a Docker size" in n for n in notes), notes


def test_a_size_beyond_int64_is_refused_and_a_long_one_stays_exact() -> None:
    with pytest.raises(ValueError, match="is beyond 2\\^63-1 bytes"):
        quantity_bytes("9" * 400)
    assert parse_quantity("1" + "0" * 100 + ".0000000001") == Decimal(
        "1" + "0" * 100 + ".000000001"
    )  # rounded up to 1n
    assert parse_quantity("1e999999999") > 0 and parse_quantity("1e-999999999") == Decimal("1e-9")
    with pytest.raises(ValueError, match="exponent beyond int64"):
        parse_quantity("1e" + "9" * 30)
