"""Checks across the objects of one deployment (advice/deployment/graph.py): ports against containerPorts,
probes and Services; GPUs against the engine's ranks in each pod; the LMCache server a vLLM workload
connects to; pinned memory and /dev/shm against the pod. Each document is written here in the shape
people ship it: a Deployment and its Service, a LeaderWorkerSet, an LMCache DaemonSet beside a vLLM
Deployment, a compose file with a router."""

from __future__ import annotations

import re

import pytest

from reading import review
from vllm_caching_mcp.advice.review import ReviewResult

IMAGE = "vllm/vllm-openai:v0.33.0"
M = "meta-llama/Llama-3.1-8B-Instruct"


def hits(result: ReviewResult, rule: str) -> list[tuple[str, int | None]]:
    return [(f.location.file, f.location.line) for f in result.findings if f.rule_id == rule]


def line_of(text: str, needle: str, after: str = "") -> int:
    """The 1-based line of the first ``needle`` after the first ``after``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if after in line) if after else 0
    return next(i for i, line in enumerate(lines) if i >= start and needle in line) + 1


def deployment(
    *,
    port_arg: str = "8000",
    container_port: int = 8000,
    probe_port: str = "http",
    gpus: int | None = 1,
    tp: int = 1,
    extra_args: str = "",
    env: str = "",
    volumes: str = "",
    mounts: str = "",
    limits: str = "",
    host_network: bool = False,
    image: str = IMAGE,
    kind: str = "Deployment",
    sidecar: str = "",
) -> str:
    gpu = f"\n              nvidia.com/gpu: {gpus}" if gpus is not None else ""
    resources = f"          resources:\n            limits:{gpu}{limits}\n" if gpu or limits else ""
    network = "      hostNetwork: true\n" if host_network else ""
    replicas = "  replicas: 1\n" if kind in ("Deployment", "StatefulSet") else ""
    return f"""apiVersion: apps/v1
kind: {kind}
metadata:
  name: vllm
spec:
{replicas}  selector:
    matchLabels: {{app: vllm}}
  template:
    metadata:
      labels: {{app: vllm, tier: serving}}
    spec:
{network}      containers:
        - name: vllm
          image: {image}
          args: [{M}, --port, "{port_arg}", --tensor-parallel-size, "{tp}"{extra_args}]
          ports:
            - name: http
              containerPort: {container_port}
          readinessProbe:
            httpGet: {{path: /health, port: {probe_port}}}
{env}{resources}{mounts}{sidecar}{volumes}"""


SERVICE = """---
apiVersion: v1
kind: Service
metadata:
  name: vllm
spec:
  selector: {app: vllm}
  ports:
    - name: http
      port: 80
      targetPort: TARGET
"""


# --- ports ---


def test_ports_that_agree_are_quiet() -> None:
    # --port 8000, containerPort 8000 named http, the probe and the Service on the name: all one port
    text = deployment() + SERVICE.replace("TARGET", "http")
    assert hits(review(("vllm.yaml", text)), "pitfall.server-port-not-reached") == []


def test_a_container_port_that_is_not_the_served_one() -> None:
    text = deployment(container_port=8080)
    found = review(("vllm.yaml", text))
    # the containerPort disagrees with --port 8000, and so does the probe on its name
    assert hits(found, "pitfall.server-port-not-reached") == [
        ("vllm.yaml", line_of(text, "containerPort")),
        ("vllm.yaml", line_of(text, "httpGet")),
    ]
    message = next(f.message for f in found.findings if f.rule_id == "pitfall.server-port-not-reached")
    assert "containerPort 8080" in message and "--port 8000" in message


def test_a_probe_on_another_port_and_a_name_no_port_has() -> None:
    numbered = deployment(probe_port="9000")
    assert hits(review(("a.yaml", numbered)), "pitfall.server-port-not-reached") == [
        ("a.yaml", line_of(numbered, "httpGet"))
    ]
    named = deployment(probe_port="metrics")
    found = review(("b.yaml", named))
    assert hits(found, "pitfall.server-port-not-reached") == [("b.yaml", line_of(named, "httpGet"))]
    assert any("'metrics'" in f.message for f in found.findings)


def test_a_lifecycle_hook_or_exec_probe_asking_another_port() -> None:
    """A preStop hook that drains by polling /metrics on localhost asks the port the server binds, as an exec
    probe does; a hook on another port never sees the server (llmaz polls 8000 while the server is on 8080)."""
    hook = """          lifecycle:
            preStop:
              exec:
                command: [/bin/sh, -c, "until curl -s http://localhost:PORT/metrics; do sleep 5; done"]
            postStart:
              httpGet: {path: /health, port: 8000}
"""
    text = deployment(sidecar=hook.replace("PORT", "8080"))  # the server binds 8000, as the postStart hook asks
    assert hits(review(("vllm.yaml", text)), "pitfall.server-port-not-reached") == [
        ("vllm.yaml", line_of(text, "command:", after="preStop"))
    ]
    quiet = deployment(sidecar=hook.replace("PORT", "8000"))
    assert hits(review(("vllm.yaml", quiet)), "pitfall.server-port-not-reached") == []


def test_the_default_port_is_the_one_read_in_the_wheels() -> None:
    # no --port: vLLM binds 8000 (FrontendArgs.port), so containerPort 8080 is wrong and 8000 right
    text = deployment(container_port=8080).replace(', --port, "8000"', "")
    found = review(("vllm.yaml", text))
    assert hits(found, "pitfall.server-port-not-reached")
    assert any("--port 8000 (its default)" in f.message for f in found.findings)
    right = deployment().replace(', --port, "8000"', "")
    assert hits(review(("vllm.yaml", right)), "pitfall.server-port-not-reached") == []


def test_a_port_from_a_variable_is_not_checked() -> None:
    text = deployment(
        port_arg="$(PORT)",
        container_port=8080,
        env="          env:\n            - {name: PORT, valueFrom: {configMapKeyRef: {name: ports, key: vllm}}}\n",
    )
    assert hits(review(("vllm.yaml", text)), "pitfall.server-port-not-reached") == []


@pytest.mark.parametrize(("target", "wrong"), [("8000", False), ("http", False), ("8080", True), ("web", True)])
def test_a_service_selecting_the_pod_sends_to_the_served_port(target: str, wrong: bool) -> None:
    text = deployment() + SERVICE.replace("TARGET", target)
    found = hits(review(("vllm.yaml", text)), "pitfall.server-port-not-reached")
    assert found == ([("vllm.yaml", line_of(text, "targetPort"))] if wrong else [])


def test_a_service_selecting_other_pods_is_not_compared() -> None:
    text = deployment() + SERVICE.replace("TARGET", "8080").replace("{app: vllm}", "{app: router}")
    assert hits(review(("vllm.yaml", text)), "pitfall.server-port-not-reached") == []


def test_a_service_that_reaches_a_sidecar_is_not_a_mismatch() -> None:
    sidecar = (
        "        - name: routing-proxy\n          image: ghcr.io/example/proxy:1.0\n"
        "          ports:\n            - {containerPort: 9002}\n"
    )
    text = deployment(sidecar=sidecar) + SERVICE.replace("TARGET", "9002")
    assert hits(review(("vllm.yaml", text)), "pitfall.server-port-not-reached") == []


def test_a_compose_service_publishing_another_port() -> None:
    compose = f"""services:
  vllm:
    image: {IMAGE}
    command: [--model, {M}, --port, "8000"]
    ports: ["8080:8080"]
    deploy:
      resources:
        reservations:
          devices: [{{driver: nvidia, count: 1, capabilities: [gpu]}}]
  router:
    image: lmcache/lmstack-router:v0.1.9
    command: [--static-backends, "http://vllm:8000", --port, "8001"]
    ports: ["8001:8001"]
"""
    found = review(("compose.yaml", compose))
    assert hits(found, "pitfall.server-port-not-reached") == [("compose.yaml", line_of(compose, "ports:"))]
    assert hits(found, "pitfall.no-gpu-requested") == []


# --- GPUs ---


def test_no_gpu_requested_points_at_the_resources() -> None:
    text = deployment(gpus=None, limits="\n              memory: 32Gi")
    assert hits(review(("vllm.yaml", text)), "pitfall.no-gpu-requested") == [
        ("vllm.yaml", line_of(text, "memory: 32Gi"))
    ]


@pytest.mark.parametrize(
    "image",
    ["public.ecr.aws/q9t5s3a7/vllm-cpu-release-repo:v0.33.0", "ghcr.io/llm-d/llm-d-inference-sim:v0.5.0"],
)
def test_cpu_builds_and_simulators_need_no_gpu(image: str) -> None:
    text = deployment(gpus=None, image=image).replace("args: [", "command: [vllm, serve]\n          args: [")
    assert hits(review(("vllm.yaml", text)), "pitfall.no-gpu-requested") == []


def test_an_operators_resource_is_not_judged_for_gpus() -> None:
    runtime = f"""apiVersion: serving.kserve.io/v1alpha1
kind: ClusterServingRuntime
metadata:
  name: vllm
spec:
  containers:
    - name: kserve-container
      image: {IMAGE}
      command: [python, -m, vllm.entrypoints.openai.api_server]
      args: [--model=/mnt/models, --port=8080]
"""
    assert hits(review(("runtime.yaml", runtime)), "pitfall.no-gpu-requested") == []


def test_production_stack_values_without_request_gpu() -> None:
    values = """servingEngineSpec:
  modelSpec:
    - name: llama
      repository: vllm/vllm-openai
      tag: v0.33.0
      modelURL: meta-llama/Llama-3.1-8B-Instruct
      replicaCount: 1
      requestCPU: 8
      requestMemory: 32Gi
"""
    found = review(("values.yaml", values))
    assert hits(found, "pitfall.no-gpu-requested") == [("values.yaml", line_of(values, "requestMemory"))]
    given = review(("values.yaml", values + "      requestGPU: 1\n"))
    assert hits(given, "pitfall.no-gpu-requested") == []


def test_ray_waits_for_gpus_a_one_gpu_pod_never_has() -> None:
    text = deployment(tp=4, extra_args=", --distributed-executor-backend, ray")
    found = review(("vllm.yaml", text))
    assert hits(found, "pitfall.gpus-fewer-than-ranks") == [("vllm.yaml", line_of(text, "nvidia.com/gpu"))]
    # the multiprocessing executor's own refusal is the error rule's, not reported twice
    plain = review(("vllm.yaml", deployment(tp=4)))
    assert hits(plain, "pitfall.world-size-over-visible-gpus") and not hits(plain, "pitfall.gpus-fewer-than-ranks")


def test_a_container_that_joins_a_ray_cluster_lets_ray_place_the_ranks() -> None:
    def pod(first: str) -> str:
        serve = f"vllm serve {M} --tensor-parallel-size 4 --distributed-executor-backend ray"
        command = f"          command: [sh, -c, '{first}{serve}']\n"
        return re.sub(r"          args: \[.*\]\n", command, deployment(tp=4))

    alone = review(("vllm.yaml", pod("")))
    assert hits(alone, "pitfall.gpus-fewer-than-ranks")  # Ray waits for 4 GPUs a one-GPU pod never has
    joined = review(("vllm.yaml", pod("ray start --address=$RAY_HEAD:6379 && ")))
    assert hits(joined, "pitfall.gpus-fewer-than-ranks") == []


def lws(gpus: int, env: str = "") -> str:
    def pod(part: str, command: str) -> str:
        return f"""    {part}:
      metadata:
        labels: {{app: vllm}}
      spec:
        containers:
          - name: vllm
            image: {IMAGE}
            command: [sh, -c, "{command}"]
{env}            resources:
              limits:
                nvidia.com/gpu: {gpus}
"""

    leader = f"vllm serve {M} --tensor-parallel-size 8 --pipeline-parallel-size 2 --distributed-executor-backend ray"
    return (
        "apiVersion: leaderworkerset.x-k8s.io/v1\nkind: LeaderWorkerSet\nmetadata:\n  name: vllm\nspec:\n"
        "  replicas: 1\n  leaderWorkerTemplate:\n    size: 2\n"
        + pod("leaderTemplate", leader)
        + pod("workerTemplate", "ray start --address=$(LWS_LEADER_ADDRESS):6379 --block")
    )


def test_a_leaderworkerset_spreads_tp_x_pp_over_its_group() -> None:
    # TP 8 x PP 2 over a group of 2 pods: 8 GPUs a pod
    assert hits(review(("lws.yaml", lws(8))), "pitfall.gpus-fewer-than-ranks") == []
    short = lws(4)
    found = review(("lws.yaml", short))
    assert hits(found, "pitfall.gpus-fewer-than-ranks") == [("lws.yaml", line_of(short, "nvidia.com/gpu"))]
    assert any("over the 2 pods of its group" in f.message for f in found.findings)


def test_cuda_visible_devices_hiding_ranks_in_a_group() -> None:
    env = '            env:\n              - {name: CUDA_VISIBLE_DEVICES, value: "0,1,2,3"}\n'
    text = lws(8, env)
    assert hits(review(("lws.yaml", text)), "pitfall.gpus-fewer-than-ranks") == [
        ("lws.yaml", line_of(text, "CUDA_VISIBLE_DEVICES"))
    ]


def test_data_parallel_ranks_on_one_pod_each_take_gpus() -> None:
    local = deployment(gpus=4, tp=2, extra_args=', --data-parallel-size, "4", --data-parallel-size-local, "2"')
    assert hits(review(("vllm.yaml", local)), "pitfall.gpus-fewer-than-ranks") == []
    short = deployment(gpus=2, tp=2, extra_args=', --data-parallel-size, "2"')
    assert hits(review(("vllm.yaml", short)), "pitfall.gpus-fewer-than-ranks") == [
        ("vllm.yaml", line_of(short, "nvidia.com/gpu"))
    ]


# --- the LMCache server ---

MP_CONFIG = '{"kv_connector":"LMCacheMPConnector","kv_role":"kv_both","kv_connector_extra_config":{EXTRA}}'


def lmcache_daemonset(host_network: bool = True, port: str = "6555", request: str = "80Gi") -> str:
    network = "      hostNetwork: true\n" if host_network else ""
    return f"""apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: lmcache-server
spec:
  selector:
    matchLabels: {{app: lmcache-server}}
  template:
    metadata:
      labels: {{app: lmcache-server}}
    spec:
{network}      containers:
        - name: lmcache
          image: lmcache/standalone:v0.5.6
          command: [lmcache, server, --host, 0.0.0.0, --port, "{port}", --l1-size-gb, "60", --eviction-policy, LRU]
          resources:
            requests:
              memory: {request}
            limits:
              memory: 100Gi
"""


def vllm_with_mp(extra: str, host_network: bool = False) -> str:
    config = MP_CONFIG.replace("{EXTRA}", extra)
    return deployment(tp=1, extra_args=f", --kv-transfer-config, '{config}'", host_network=host_network)


def test_localhost_is_not_a_daemonset_on_the_nodes_network() -> None:
    vllm = vllm_with_mp('{"lmcache.mp.port":6555}')
    found = review(("lmcache.yaml", lmcache_daemonset()), ("vllm.yaml", vllm))
    assert hits(found, "pitfall.lmcache-server-unreachable") == [("vllm.yaml", line_of(vllm, "kv-transfer-config"))]
    message = next(f.message for f in found.findings if f.rule_id == "pitfall.lmcache-server-unreachable")
    assert "localhost:6555" in message and "hostNetwork" in message and "DaemonSet/lmcache-server" in message


def test_both_on_the_nodes_network_reach_each_other() -> None:
    vllm = vllm_with_mp('{"lmcache.mp.port":6555}', host_network=True)
    found = review(("lmcache.yaml", lmcache_daemonset()), ("vllm.yaml", vllm))
    assert hits(found, "pitfall.lmcache-server-unreachable") == []
    # ... on the port the server binds
    other = vllm_with_mp('{"lmcache.mp.port":5555}', host_network=True)
    found = review(("lmcache.yaml", lmcache_daemonset()), ("vllm.yaml", other))
    assert hits(found, "pitfall.lmcache-server-unreachable") == [("vllm.yaml", line_of(other, "kv-transfer-config"))]


def test_a_server_in_the_same_pod_is_on_localhost() -> None:
    sidecar = (
        "        - name: lmcache\n          image: lmcache/standalone:v0.5.6\n"
        '          command: [python3, -m, lmcache.v1.multiprocess.server, --port, "6555", --l1-size-gb, "20"]\n'
    )
    vllm = vllm_with_mp('{"lmcache.mp.port":6555}').replace("          readinessProbe", "          readinessProbe", 1)
    vllm = vllm.rstrip("\n") + "\n" + sidecar
    found = review(("vllm.yaml", vllm))
    assert hits(found, "pitfall.lmcache-server-unreachable") == []
    assert [w.name for w in found.workloads] == ["Deployment/vllm container vllm"]


def test_localhost_of_a_pod_that_runs_no_server() -> None:
    # the pod is written whole: no container of it runs an LMCache server, and it is on its own network
    vllm = vllm_with_mp('{"lmcache.mp.port":6555}')
    found = review(("vllm.yaml", vllm))
    assert hits(found, "pitfall.lmcache-server-unreachable") == [("vllm.yaml", line_of(vllm, "kv-transfer-config"))]
    assert any("no container of it runs an LMCache server" in f.message for f in found.findings)
    # on the node's network a server of another file (a DaemonSet) may listen there
    on_node = vllm_with_mp('{"lmcache.mp.port":6555}', host_network=True)
    assert hits(review(("vllm.yaml", on_node)), "pitfall.lmcache-server-unreachable") == []
    # one script that starts both
    both = vllm.replace(
        f"args: [{M}",
        'command: [sh, -c, "lmcache server --port 6555 --l1-size-gb 20 & exec vllm serve $0 $@"]\n'
        f"          args: [{M}",
    )
    found = review(("vllm.yaml", both))
    assert [w.name for w in found.workloads] == ["Deployment/vllm container vllm"]
    # neither the unreachable server nor a port mismatch: the container serves 8000 and binds 6555
    assert [f.rule_id for f in found.findings if f.rule_id.startswith("pitfall.")] == []


def test_a_remote_url_naming_a_service_on_another_port() -> None:
    server = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: cache
spec:
  selector:
    matchLabels: {app: cache}
  template:
    metadata:
      labels: {app: cache}
    spec:
      containers:
        - name: cache
          image: lmcache/vllm-openai:v0.3.9
          command: [lmcache_server, 0.0.0.0, "8100"]
---
apiVersion: v1
kind: Service
metadata:
  name: cache-svc
spec:
  selector: {app: cache}
  ports:
    - {port: 81, targetPort: 8100}
"""
    env = "          env:\n            - {name: LMCACHE_REMOTE_URL, value: 'lm://cache-svc.default.svc.cluster.local:8100'}\n"
    lmcache = ', --kv-transfer-config, \'{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}\''
    vllm = deployment(extra_args=lmcache, env=env)
    found = review(("cache.yaml", server), ("vllm.yaml", vllm))
    assert hits(found, "pitfall.lmcache-server-unreachable") == [("vllm.yaml", line_of(vllm, "LMCACHE_REMOTE_URL"))]
    right = vllm.replace("cluster.local:8100", "cluster.local:81")
    assert hits(review(("cache.yaml", server), ("vllm.yaml", right)), "pitfall.lmcache-server-unreachable") == []


def test_a_compose_router_stack_with_a_remote_lmcache_server() -> None:
    compose = f"""services:
  cache:
    image: lmcache/vllm-openai:v0.3.9
    entrypoint: [lmcache_server, 0.0.0.0, "65432"]
  vllm:
    image: {IMAGE}
    command: [--model, {M}, --kv-transfer-config, '{{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}}']
    environment:
      LMCACHE_REMOTE_URL: lm://localhost:65432
    gpus: all
"""
    found = review(("compose.yaml", compose))
    assert hits(found, "pitfall.lmcache-server-unreachable") == [
        ("compose.yaml", line_of(compose, "LMCACHE_REMOTE_URL"))
    ]
    # by the service's name the server is reached (compose's network)
    named = compose.replace("lm://localhost:65432", "lm://cache:65432")
    assert hits(review(("compose.yaml", named)), "pitfall.lmcache-server-unreachable") == []


def test_an_lmcache_daemonset_alone_is_reviewed_as_an_lmcache_server() -> None:
    text = lmcache_daemonset(request="10Gi")
    found = review(("lmcache.yaml", text))
    # its 60 GiB pool x 1.1 + 4 GiB is above the 10Gi request, within the 100Gi limit
    assert [(f.rule_id, f.location.line) for f in found.findings] == [
        ("pitfall.pinned-memory-over-pod-request", line_of(text, "--l1-size-gb"))
    ]
    assert found.workloads == []  # no vLLM workload, so no vLLM rule and no vLLM advisory
    assert any("is an LMCache server" in note for note in found.notes)
    assert review(("lmcache.yaml", lmcache_daemonset(request="80Gi"))).findings == []


def test_an_older_lmcache_servers_buffer_option() -> None:
    text = lmcache_daemonset(request="10Gi").replace(
        '[lmcache, server, --host, 0.0.0.0, --port, "6555", --l1-size-gb, "60", --eviction-policy, LRU]',
        '[/opt/venv/bin/python3, -m, lmcache.v1.multiprocess.server, --port, "6555", --cpu-buffer-size, "60"]',
    )
    found = review(("lmcache.yaml", text))
    assert hits(found, "pitfall.pinned-memory-over-pod-request") == [
        ("lmcache.yaml", line_of(text, "--cpu-buffer-size"))
    ]
    limited = text.replace("memory: 100Gi", "memory: 32Gi")
    assert hits(review(("lmcache.yaml", limited)), "pitfall.pinned-memory-over-pod-limit")


# --- /dev/shm ---

SHM_MOUNT = "          volumeMounts:\n            - {name: dshm, mountPath: /dev/shm}\n"


def shm_volume(size: str) -> str:
    return f"      volumes:\n        - name: dshm\n          emptyDir: {{medium: Memory, sizeLimit: {size}}}\n"


def test_a_shm_size_above_the_memory_limit() -> None:
    text = deployment(limits="\n              memory: 30Gi", mounts=SHM_MOUNT, volumes=shm_volume("128Gi"))
    assert hits(review(("vllm.yaml", text)), "pitfall.shm-above-memory-limit") == [
        ("vllm.yaml", line_of(text, "sizeLimit"))
    ]
    within = deployment(limits="\n              memory: 30Gi", mounts=SHM_MOUNT, volumes=shm_volume("8Gi"))
    assert hits(review(("vllm.yaml", within)), "pitfall.shm-above-memory-limit") == []


def test_a_memory_limit_below_a_server_process() -> None:
    text = deployment(limits="\n              memory: 2Gi")
    assert hits(review(("vllm.yaml", text)), "pitfall.memory-limit-below-server") == [
        ("vllm.yaml", line_of(text, "memory: 2Gi"))
    ]


@pytest.mark.parametrize("kind", ["Deployment", "StatefulSet", "DaemonSet", "Job"])
def test_no_dev_shm_with_tp_on_every_controller(kind: str) -> None:
    text = deployment(
        kind=kind,
        gpus=2,
        tp=2,
        mounts="          volumeMounts:\n            - {name: cache, mountPath: /models/hf}\n",
    )
    found = review(("vllm.yaml", text))
    # found where a /dev/shm volume would be mounted: among the container's volumeMounts
    assert hits(found, "pitfall.shm-too-small-for-workers") == [("vllm.yaml", line_of(text, "mountPath: /models/hf"))]
    mounted = deployment(kind=kind, gpus=2, tp=2, mounts=SHM_MOUNT, volumes=shm_volume("2Gi"))
    assert hits(review(("vllm.yaml", mounted)), "pitfall.shm-too-small-for-workers") == []


def test_no_dev_shm_in_a_leaderworkerset_pod() -> None:
    text = lws(8)
    found = review(("lws.yaml", text))
    assert hits(found, "pitfall.shm-too-small-for-workers") == [("lws.yaml", line_of(text, "- name: vllm"))]


def test_a_shm_sized_too_small_points_at_its_size() -> None:
    text = deployment(gpus=2, tp=2, mounts=SHM_MOUNT, volumes=shm_volume("64Mi"))
    assert hits(review(("vllm.yaml", text)), "pitfall.shm-too-small-for-workers") == [
        ("vllm.yaml", line_of(text, "sizeLimit"))
    ]


def test_a_remote_lmcache_server_that_evicts_nothing() -> None:
    server = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: cache
spec:
  selector:
    matchLabels: {app: cache}
  template:
    metadata:
      labels: {app: cache}
    spec:
      containers:
        - name: cache
          image: lmcache/vllm-openai:v0.3.9
          command: [lmcache_server, 0.0.0.0, "8100"]
          resources:
            limits:
              memory: 16Gi
"""
    found = review(("cache.yaml", server))
    assert hits(found, "pitfall.lmcache-server-keeps-every-chunk") == [("cache.yaml", line_of(server, "16Gi"))]
    # the multiprocess server evicts within --l1-size-gb: not this rule's
    assert hits(review(("lmcache.yaml", lmcache_daemonset())), "pitfall.lmcache-server-keeps-every-chunk") == []


def test_production_stack_cache_server_values() -> None:
    values = """servingEngineSpec:
  modelSpec:
    - name: llama
      repository: lmcache/vllm-openai
      tag: latest-nightly
      modelURL: meta-llama/Llama-3.1-8B-Instruct
      replicaCount: 1
      requestCPU: 8
      requestMemory: 32Gi
      requestGPU: 1
cacheserverSpec:
  replicaCount: 1
  containerPort: 8080
  servicePort: 81
  serde: naive
  repository: lmcache/vllm-openai
  tag: latest-nightly
  resources:
    requests:
      memory: 8G
    limits:
      memory: 10G
"""
    found = review(("values.yaml", values))
    assert hits(found, "pitfall.lmcache-server-keeps-every-chunk") == [("values.yaml", line_of(values, "memory: 10G"))]
    # the chart's other tags run older servers, which are not read
    older = review(("values.yaml", values.replace("tag: latest-nightly\n  resources", "tag: v0.2.1\n  resources")))
    assert hits(older, "pitfall.lmcache-server-keeps-every-chunk") == []


# --- a P/D proxy's upstreams ---

NIXL = """'{"kv_connector":"NixlConnector","kv_role":"kv_both"}'"""


def pd_script(decoder_port: str) -> str:
    return f"""#!/bin/bash
CUDA_VISIBLE_DEVICES=0 vllm serve {M} --port 8100 --kv-transfer-config {NIXL} &
CUDA_VISIBLE_DEVICES=1 vllm serve {M} --port 8200 --kv-transfer-config {NIXL} &
python3 toy_proxy_server.py --port 8192 \\
    --prefiller-hosts localhost --prefiller-ports 8100 \\
    --decoder-hosts localhost --decoder-ports {decoder_port} &
wait
"""


def test_a_proxy_sends_to_the_ports_its_engines_listen_on() -> None:
    assert hits(review(("pd.sh", pd_script("8200"))), "pitfall.server-port-not-reached") == []
    wrong = pd_script("8300")
    found = review(("pd.sh", wrong))
    assert hits(found, "pitfall.server-port-not-reached") == [("pd.sh", line_of(wrong, "--decoder-ports"))]
    assert any("--decoder-ports 8300" in f.message and "--port 8100" in f.message for f in found.findings)


def test_a_compose_proxy_names_its_engines_by_service() -> None:
    def engine(name: str, port: str) -> str:
        return f"""  {name}:
    image: {IMAGE}
    command: [--model, {M}, --port, "{port}", --kv-transfer-config, {NIXL}]
    gpus: all
"""

    compose = (
        "services:\n"
        + engine("prefill", "8100")
        + engine("decode", "8200")
        + f"""  proxy:
    image: {IMAGE}
    entrypoint: [python3, /opt/toy_proxy_server.py, --port, "8000", --prefiller-hosts, prefill,
      --prefiller-ports, "8100", --decoder-hosts, decode, --decoder-ports, "8100"]
"""
    )
    found = review(("compose.yaml", compose))
    assert hits(found, "pitfall.server-port-not-reached") == [("compose.yaml", line_of(compose, "--decoder-ports"))]
    right = compose.replace('--decoder-ports, "8100"', '--decoder-ports, "8200"')
    assert hits(review(("compose.yaml", right)), "pitfall.server-port-not-reached") == []


def test_a_proxy_names_a_service_on_a_port_it_does_not_have() -> None:
    proxy = f"""---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: pd-proxy
spec:
  selector:
    matchLabels: {{app: pd-proxy}}
  template:
    metadata:
      labels: {{app: pd-proxy}}
    spec:
      containers:
        - name: proxy
          image: {IMAGE}
          command: [python3, /opt/mooncake_connector_proxy.py, --port, "8000",
                    --prefill, "http://vllm:8000", --decode, "http://vllm-decode:8000"]
"""
    text = deployment() + SERVICE.replace("TARGET", "http") + proxy
    found = review(("pd.yaml", text))
    # the Service vllm is reached on its port 80 (targetPort http); 8000 is the pod's, not the Service's
    assert hits(found, "pitfall.server-port-not-reached") == [("pd.yaml", line_of(text, "--prefill"))]
    right = text.replace("http://vllm:8000", "http://vllm:80")
    assert hits(review(("pd.yaml", right)), "pitfall.server-port-not-reached") == []


def test_a_compose_healthcheck_asks_the_served_port() -> None:
    compose = f"""services:
  vllm:
    image: {IMAGE}
    command: [--model, {M}, --port, "8000"]
    gpus: all
    healthcheck:
      test: ["CMD-SHELL", "curl -sf http://localhost:8080/health || exit 1"]
"""
    assert hits(review(("compose.yaml", compose)), "pitfall.server-port-not-reached") == [
        ("compose.yaml", line_of(compose, "curl"))
    ]
    right = compose.replace("localhost:8080", "localhost:8000")
    assert hits(review(("compose.yaml", right)), "pitfall.server-port-not-reached") == []


def test_docker_runs_of_a_server_and_vllm_share_the_hosts_network_or_not() -> None:
    config = MP_CONFIG.replace("{EXTRA}", '{"lmcache.mp.port":5555}')

    def script(network: str) -> str:
        return (
            f"docker run -d --name lmcache {network} --entrypoint /opt/venv/bin/lmcache lmcache/standalone:v0.5.6 "
            "server --host 0.0.0.0 --port 5555 --l1-size-gb 40 --eviction-policy LRU\n"
            f"docker run -d --name vllm --gpus all {network} {IMAGE} --model {M} --kv-transfer-config '{config}'\n"
        )

    bridged = script("-p 5555:5555")
    found = review(("run.sh", bridged))
    assert hits(found, "pitfall.lmcache-server-unreachable") == [("run.sh", 2)]
    assert hits(review(("run.sh", script("--network host"))), "pitfall.lmcache-server-unreachable") == []


def test_a_remote_url_of_another_server_kind_is_not_an_lmcache_server() -> None:
    lmcache = ', --kv-transfer-config, \'{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}\''
    env = "          env:\n            - {name: LMCACHE_REMOTE_URL, value: 'redis://localhost:6379'}\n"
    redis = "        - name: redis\n          image: redis:7\n          ports:\n            - {containerPort: 6379}\n"
    text = deployment(extra_args=lmcache, env=env, sidecar=redis)
    assert hits(review(("vllm.yaml", text)), "pitfall.lmcache-server-unreachable") == []


def test_an_engine_over_nnodes_pods_needs_its_share_of_gpus_in_each() -> None:
    spread = ', --nnodes, "2", --node-rank, "0"'
    fits = deployment(kind="StatefulSet", gpus=4, tp=8, extra_args=spread)
    assert hits(review(("vllm.yaml", fits)), "pitfall.gpus-fewer-than-ranks") == []
    short = deployment(kind="StatefulSet", gpus=2, tp=8, extra_args=spread)
    found = review(("vllm.yaml", short))
    assert hits(found, "pitfall.gpus-fewer-than-ranks") == [("vllm.yaml", line_of(short, "nvidia.com/gpu"))]
    # Ray places the data-parallel ranks: this pod runs its TP x PP only
    ray = deployment(gpus=2, tp=2, extra_args=', --data-parallel-size, "4", --data-parallel-backend, ray')
    assert hits(review(("vllm.yaml", ray)), "pitfall.gpus-fewer-than-ranks") == []


def mp_server_daemonset(image: str, args: str) -> str:
    return f"""apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: lmcache-mp
spec:
  selector:
    matchLabels: {{app: lmcache-mp}}
  template:
    metadata:
      labels: {{app: lmcache-mp}}
    spec:
      hostNetwork: true
      containers:
        - name: server
          image: {image}
          command:
            - python3
            - -m
            - lmcache.v1.multiprocess.server
{args}          resources:
            limits:
              memory: 100Gi
"""


def test_an_lmcache_server_option_its_release_does_not_have() -> None:
    args = '            - --port\n            - "6555"\n            - --cpu-buffer-size\n            - "60"\n'
    older = mp_server_daemonset("lmcache/standalone:v0.3.13", args)
    assert hits(review(("lmcache.yaml", older)), "pitfall.lmcache-server-option-unknown") == []
    newer = mp_server_daemonset("lmcache/standalone:v0.3.14", args)
    found = review(("lmcache.yaml", newer))
    assert hits(found, "pitfall.lmcache-server-option-unknown") == [("lmcache.yaml", line_of(newer, "--cpu-buffer"))]
    message = next(f.message for f in found.findings if f.rule_id == "pitfall.lmcache-server-option-unknown")
    assert "--cpu-buffer-size (removed in 0.3.14)" in message and "--l1-size-gb" in message
    assert "LMCache 0.3.14 (the image tag names it)" in message and "assumed" not in message


def test_a_moving_lmcache_image_is_judged_as_the_newest_release_and_says_so() -> None:
    args = '            - --l1-size\n            - "60"\n            - --max-worker\n            - "4"\n'
    text = mp_server_daemonset("lmcache/standalone:nightly", args)
    found = review(("lmcache.yaml", text))
    # argparse takes a unique prefix as the option: --l1-size is --l1-size-gb, --max-worker --max-workers
    assert hits(found, "pitfall.lmcache-server-option-unknown") == []
    wrong = mp_server_daemonset("lmcache/standalone:nightly", '            - --l1\n            - "60"\n')
    found = review(("lmcache.yaml", wrong))
    assert hits(found, "pitfall.lmcache-server-option-unknown") == [("lmcache.yaml", line_of(wrong, "--l1"))]
    message = next(f.message for f in found.findings if f.rule_id == "pitfall.lmcache-server-option-unknown")
    assert "ambiguous" in message and "is assumed: the newest release covered" in message and ":nightly" in message


def test_an_lmcache_server_container_gets_the_hygiene_checks_of_a_vllm_one() -> None:
    text = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: lmcache
spec:
  selector:
    matchLabels: {app: lmcache}
  template:
    metadata:
      labels: {app: lmcache}
    spec:
      containers:
        - name: server
          image: lmcache/standalone:latest
          command: [bash, -c, "pip install redis && lmcache server --port 6555 --l1-size-gb 20"]
          env:
            - name: HF_TOKEN
              value: hf_abcdefghijklmnopqrstuvwxyz0123456789
"""
    found = review(("lmcache.yaml", text))
    assert hits(found, "pitfall.floating-image-tag") == [("lmcache.yaml", line_of(text, "image:"))]
    floating = next(f.message for f in found.findings if f.rule_id == "pitfall.floating-image-tag")
    assert "reviewed as LMCache" in floating and "vLLM" not in floating
    assert hits(found, "pitfall.install-at-start") == [("lmcache.yaml", line_of(text, "pip install"))]
    assert hits(found, "pitfall.secret-in-plain-text") == [("lmcache.yaml", line_of(text, "HF_TOKEN"))]
    pinned = text.replace("standalone:latest", "standalone:v0.5.6")
    assert hits(review(("lmcache.yaml", pinned)), "pitfall.floating-image-tag") == []


def test_an_lmcache_sidecar_is_judged_once_as_its_own_server() -> None:
    sidecar = """        - name: lmcache
          image: lmcache/standalone:nightly
          command: [lmcache, server, --port, "5555", --l1-size-gb, "20"]
"""
    text = vllm_with_mp('{"lmcache.mp.port":5555}').rstrip("\n") + "\n" + sidecar
    found = review(("vllm.yaml", text))
    assert hits(found, "pitfall.floating-image-tag") == [("vllm.yaml", line_of(text, "lmcache/standalone"))]
    message = next(f.message for f in found.findings if f.rule_id == "pitfall.floating-image-tag")
    assert "reviewed as LMCache" in message


def test_an_lmcache_server_switch_given_a_value_is_refused() -> None:
    args = '            - --disable-metrics\n            - "true"\n            - --l1-size-gb\n            - "20"\n'
    text = mp_server_daemonset("lmcache/standalone:v0.5.6", args)
    found = review(("lmcache.yaml", text))
    assert hits(found, "pitfall.lmcache-server-option-unknown") == [
        ("lmcache.yaml", line_of(text, "--disable-metrics"))
    ]
    message = next(f.message for f in found.findings if f.rule_id == "pitfall.lmcache-server-option-unknown")
    assert "the switch --disable-metrics, which takes no value, given 'true'" in message
    bare = mp_server_daemonset(
        "lmcache/standalone:v0.5.6", '            - --disable-metrics\n            - --l1-size-gb\n            - "20"\n'
    )
    assert hits(review(("lmcache.yaml", bare)), "pitfall.lmcache-server-option-unknown") == []


# --- a server reached from outside the cluster ---

EXPOSED = "pitfall.api-exposed-without-key"


@pytest.mark.parametrize(
    ("spec", "env", "extra_args", "fires"),
    [
        ("  type: LoadBalancer\n", "", "", True),
        ("  type: NodePort\n", "", "", True),
        ("", "", "", False),  # ClusterIP: inside the cluster only
        ("  type: LoadBalancer\n  loadBalancerSourceRanges: [10.0.0.0/8]\n", "", "", False),
        ("  type: LoadBalancer\n", "", ", --api-key, $(KEY)", False),
        (
            "  type: LoadBalancer\n",
            "          env:\n            - name: VLLM_API_KEY\n"
            "              valueFrom: {secretKeyRef: {name: vllm, key: api-key}}\n",
            "",
            False,
        ),
    ],
)
def test_a_server_reached_from_outside_without_an_api_key(spec: str, env: str, extra_args: str, fires: bool) -> None:
    service = SERVICE.replace("TARGET", "8000").replace("spec:\n", "spec:\n" + spec)
    text = deployment(env=env, extra_args=extra_args) + service
    result = review(("vllm.yaml", text))
    assert bool(hits(result, EXPOSED)) is fires, result.summary()
    if fires:
        assert hits(result, EXPOSED) == [("vllm.yaml", line_of(text, "apiVersion: v1"))]  # the Service


def test_an_internal_load_balancer_is_not_judged() -> None:
    internal = SERVICE.replace("TARGET", "8000").replace(
        "  name: vllm\nspec:\n",
        "  name: vllm\n  annotations: {networking.gke.io/load-balancer-type: Internal}\nspec:\n  type: LoadBalancer\n",
    )
    assert not hits(review(("vllm.yaml", deployment() + internal)), EXPOSED)


def test_a_service_port_that_reaches_nothing_in_the_pod_is_found_beside_one_that_does() -> None:
    """A Service with the API port and a metrics port 8080: vLLM serves /metrics on its API port, so 8080 is dead."""
    text = """apiVersion: apps/v1
kind: Deployment
metadata: {name: llm}
spec:
  selector: {matchLabels: {app: llm}}
  template:
    metadata: {labels: {app: llm}}
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.11.0
          args: [--model, m, --port, "8000"]
          resources: {limits: {nvidia.com/gpu: 1}}
---
apiVersion: v1
kind: Service
metadata: {name: llm}
spec:
  selector: {app: llm}
  ports:
    - {name: serve, port: 8000, targetPort: 8000}
    - {name: metrics, port: 8080, targetPort: 8080}
"""
    hits = [f for f in review(("deploy.yaml", text)).findings if f.rule_id == "pitfall.server-port-not-reached"]
    assert [h.location.line for h in hits] == [22] and "targetPort 8080, where nothing of the pod listens" in hits[
        0
    ].message
    exporter = "        - {name: exporter, image: prom/statsd-exporter:v0.28.0, ports: [{containerPort: 8080}]}\n"
    served = text.replace("---\n", exporter + "---\n", 1)  # a sidecar that serves 8080
    assert "pitfall.server-port-not-reached" not in {f.rule_id for f in review(("deploy.yaml", served)).findings}


INGRESSED = """apiVersion: apps/v1
kind: Deployment
metadata: {name: llm}
spec:
  selector: {matchLabels: {app: llm}}
  template:
    metadata: {labels: {app: llm}}
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.11.0
          args: [--model, m]
          resources: {limits: {nvidia.com/gpu: 1}}
---
apiVersion: v1
kind: Service
metadata: {name: llm-svc}
spec:
  selector: {app: llm}
  ports: [{name: http, port: 8000, targetPort: 8000}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: llm}
spec:
  rules:
    - http:
        paths:
          - path: /
            pathType: Prefix
            backend:
              service:
                name: llm
                port: {number: 8000}
"""


def test_an_ingress_to_a_service_the_files_do_not_define_is_found() -> None:
    [hit] = [f for f in review(("deploy.yaml", INGRESSED)).findings if f.rule_id == "pitfall.ingress-backend-missing"]
    assert hit.location.line == 33 and "Service 'llm', which the files do not define" in hit.message
    assert "llm-svc" in hit.message
    fixed = INGRESSED.replace("name: llm\n                port", "name: llm-svc\n                port")
    assert "pitfall.ingress-backend-missing" not in {f.rule_id for f in review(("deploy.yaml", fixed)).findings}
    wrong_port = fixed.replace("port: {number: 8000}", "port: {number: 80}")
    [port] = [f for f in review(("deploy.yaml", wrong_port)).findings if f.rule_id == "pitfall.ingress-backend-missing"]
    assert "port 80 of Service llm-svc, which has none" in port.message
    by_name = fixed.replace("port: {number: 8000}", "port: {name: http}")
    assert "pitfall.ingress-backend-missing" not in {f.rule_id for f in review(("deploy.yaml", by_name)).findings}
