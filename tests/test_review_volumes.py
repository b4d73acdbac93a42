"""The volume an LMCache disk tier is written to: an emptyDir's sizeLimit against the whole tier, a Memory
emptyDir, no mount at all (the container's own filesystem), and the shapes where none of this can be told."""

from __future__ import annotations

import textwrap

import pytest

from reading import review
from vllm_caching_mcp.advice.review import ReviewResult

OVER = "pitfall.lmcache-disk-tier-over-volume"
IN_MEMORY = "pitfall.lmcache-disk-tier-in-memory"
ON_LAYER = "pitfall.lmcache-disk-tier-on-container-layer"
UNBOUNDED = "pitfall.lmcache-disk-tier-unbounded-emptydir"
DISK_RULES = {OVER, IN_MEMORY, ON_LAYER, UNBOUNDED}


def statefulset(
    *,
    tp: int = 2,
    disk: str = "file:///cache/lmcache/",
    disk_gib: str = "100",
    mounts: str = "- {name: cache, mountPath: /cache}",
    volumes: str = "- {name: cache, emptyDir: {sizeLimit: 150Gi}}",
    connector: str = "LMCacheConnectorV1",
    kind: str = "StatefulSet",
) -> str:
    """A vLLM StatefulSet with an in-process LMCache whose disk tier is ``disk_gib`` GiB a worker process."""
    indent = " " * 8
    return (
        textwrap.dedent(f"""\
        apiVersion: apps/v1
        kind: {kind}
        metadata: {{name: vllm-lmcache}}
        spec:
          replicas: 1
          serviceName: vllm
          selector: {{matchLabels: {{app: vllm}}}}
          template:
            metadata: {{labels: {{app: vllm}}}}
            spec:
              containers:
              - name: vllm
                image: vllm/vllm-openai:v0.22.1
                args:
                - --model=meta-llama/Llama-3.1-8B-Instruct
                - --tensor-parallel-size={tp}
                - '--kv-transfer-config={{"kv_connector":"{connector}","kv_role":"kv_both"}}'
                env:
                - {{name: LMCACHE_LOCAL_CPU, value: "True"}}
                - {{name: LMCACHE_MAX_LOCAL_CPU_SIZE, value: "20"}}
                - {{name: LMCACHE_LOCAL_DISK, value: "{disk}"}}
                - {{name: LMCACHE_MAX_LOCAL_DISK_SIZE, value: "{disk_gib}"}}
                resources:
                  limits: {{nvidia.com/gpu: {tp}, memory: 256Gi}}
                volumeMounts:
                - {{name: shm, mountPath: /dev/shm}}
        """)
        + textwrap.indent(mounts, indent)
        + "\n"
        + textwrap.indent("volumes:\n- {name: shm, emptyDir: {medium: Memory, sizeLimit: 8Gi}}\n" + volumes, " " * 6)
        + "\n"
    )


def disk_findings(result: ReviewResult) -> dict[str, str]:
    return {f.rule_id: f.message for f in result.findings if f.rule_id in DISK_RULES}


def test_a_tier_over_its_emptydir_size_limit_is_found_with_the_whole_tier() -> None:
    """100 GiB a worker process, TP 2: 200 GiB in an emptyDir bounded at 150 GiB, which the kubelet evicts past."""
    found = disk_findings(review(("sts.yaml", statefulset())))
    assert set(found) == {OVER} and "= 200 > volume sizeLimit GiB = 150" in found[OVER]
    assert disk_findings(review(("sts.yaml", statefulset(tp=1)))) == {}  # 100 GiB fits


@pytest.mark.parametrize(
    "volumes",
    [
        "- {name: cache, persistentVolumeClaim: {claimName: lmcache-disk}}",
        "- {name: cache, hostPath: {path: /mnt/nvme/lmcache}}",
        "- {name: cache, emptyDir: {sizeLimit: 1Ti}}",
    ],
)
def test_a_volume_that_holds_the_tier_is_quiet(volumes: str) -> None:
    assert disk_findings(review(("sts.yaml", statefulset(volumes=volumes)))) == {}


def test_an_emptydir_without_a_size_limit_is_the_node_disk_undeclared() -> None:
    found = disk_findings(review(("sts.yaml", statefulset(volumes="- {name: cache, emptyDir: {}}"))))
    assert set(found) == {UNBOUNDED} and "= 200" in found[UNBOUNDED]


def test_a_memory_emptydir_makes_the_disk_tier_ram() -> None:
    memory = "- {name: cache, emptyDir: {medium: Memory, sizeLimit: 300Gi}}"
    found = disk_findings(review(("sts.yaml", statefulset(volumes=memory))))
    assert set(found) == {IN_MEMORY} and "= 200" in found[IN_MEMORY]


def test_no_volume_at_the_directory_means_the_container_filesystem() -> None:
    found = disk_findings(review(("sts.yaml", statefulset(disk="/var/cache/lmcache"))))
    assert set(found) == {ON_LAYER}
    # The mount above the directory counts, and the longest one wins: /cache/fast is a Memory emptyDir.
    nested = statefulset(
        disk="/cache/fast/lmcache",
        mounts="- {name: cache, mountPath: /cache}\n- {name: fast, mountPath: /cache/fast}",
        volumes="- {name: cache, emptyDir: {sizeLimit: 1Ti}}\n- {name: fast, emptyDir: {medium: Memory}}",
    )
    assert set(disk_findings(review(("sts.yaml", nested)))) == {IN_MEMORY}
    # A directory that only begins like a mount path is not under it.
    assert set(disk_findings(review(("sts.yaml", statefulset(disk="/cachefiles/lmcache"))))) == {ON_LAYER}


@pytest.mark.parametrize(
    "changes",
    [
        {"disk_gib": "0"},  # LMCache builds no disk backend at 0 (its default)
        {"connector": "LMCacheMPConnector"},  # the tier lives in the LMCache server, not in this pod
        {"connector": "OffloadingConnector"},
    ],
)
def test_no_disk_tier_in_this_container_is_quiet(changes: dict[str, str]) -> None:
    result = review(("sts.yaml", statefulset(disk="/var/cache/lmcache", **changes)))
    assert disk_findings(result) == {}


def test_a_patch_does_not_show_the_pod_so_its_mounts_are_not_judged() -> None:
    """A kustomize patch carries the container without the pod's volumes: its directory is not known to be
    unmounted."""
    patch = textwrap.dedent("""\
        apiVersion: apps/v1
        kind: StatefulSet
        metadata: {name: vllm-lmcache}
        spec:
          template:
            spec:
              containers:
              - name: vllm
                args: ['--kv-transfer-config={"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}']
                env:
                - {name: LMCACHE_LOCAL_DISK, value: /var/cache/lmcache}
                - {name: LMCACHE_MAX_LOCAL_DISK_SIZE, value: "100"}
        """)
    assert disk_findings(review(("patch.yaml", patch), version="0.22.1")) == {}


def test_the_connector_extra_config_wins_over_the_variables() -> None:
    """vLLM applies lmcache.* keys of kv_connector_extra_config after the variables and config file."""

    def extra(size: int) -> str:
        config = f'"kv_connector_extra_config":{{"lmcache.local_disk":"/cache/l","lmcache.max_local_disk_size":{size}}}'
        return statefulset(disk="/var/cache/lmcache", disk_gib="1").replace('"kv_both"}', f'"kv_both",{config}}}')

    assert disk_findings(review(("sts.yaml", extra(50)))) == {}  # 100 GiB in /cache (150 GiB)
    assert set(disk_findings(review(("sts.yaml", extra(100))))) == {OVER}  # 200 GiB


def compose(volumes: str = "", extra: str = "") -> str:
    """A compose service running vLLM with an in-process LMCache whose disk tier is 100 GiB, TP 2."""
    return textwrap.dedent("""\
        services:
          vllm:
            image: vllm/vllm-openai:v0.22.1
            command: >-
              --model meta-llama/Llama-3.1-8B-Instruct --tensor-parallel-size 2
              --kv-transfer-config '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}'
            environment:
              LMCACHE_LOCAL_CPU: "True"
              LMCACHE_LOCAL_DISK: "file:///cache/lmcache"
              LMCACHE_MAX_LOCAL_DISK_SIZE: "100"
            ipc: host
        """) + textwrap.indent(volumes + extra, "    ")


@pytest.mark.parametrize(
    ("volumes", "expected"),
    [
        ("", {ON_LAYER}),
        ("volumes: ['/mnt/nvme/lmcache:/cache']\n", set()),
        ("volumes: ['lmcache-disk:/cache']\n", set()),  # a named volume
        ("volumes: [{type: bind, source: /mnt/nvme, target: /cache}]\n", set()),
        ("tmpfs: /cache\n", {IN_MEMORY}),
        ("volumes: [{type: tmpfs, target: /cache}]\n", {IN_MEMORY}),
        ("volumes: ['/srv/models:/models:ro']\n", {ON_LAYER}),  # /models does not cover /cache
    ],
)
def test_a_compose_service_mounts_are_read_in_both_syntaxes(volumes: str, expected: set[str]) -> None:
    assert set(disk_findings(review(("docker-compose.yaml", compose(volumes))))) == expected


def test_an_extended_compose_service_may_bring_its_own_volumes() -> None:
    extended = compose(extra="extends: {file: base.yaml, service: gpu}\n")
    assert disk_findings(review(("docker-compose.yaml", extended))) == {}
