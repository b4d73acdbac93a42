"""Helm values of the vLLM production-stack chart and of vLLM's example chart, as their templates
render them."""

from __future__ import annotations

import json
from typing import Any

from ..containers import cache_server, cache_server_args, launch_from_argv, memory_limit, whole_number, words_from_list
from ..flags import parse_number, read_args
from ..hygiene import image_issue, liveness_issue, values_secret_issue
from ..model import ClaimSpec, ClaimUse, Deployment, Document, EnvUse, Location, Workload
from ..yaml_nodes import Located, node_location, text_of
from .base import Reading, mappings

# What the production-stack chart's engine template (helm/templates/deployment-vllm-multi.yaml of
# vllm-project/production-stack) writes from a modelSpec: these vllmConfig keys become flags; a
# vllmConfig without enablePrefixCaching true gets --no-enable-prefix-caching; lmcacheConfig sets the
# LMCache variables below and, when enabled, the LMCacheConnectorV1 --kv-transfer-config with its kvRole;
# PYTHONHASHSEED is always "123"; tensorParallelSize mounts a memory emptyDir on /dev/shm of shmSize
# (default 20Gi); enablePD sets hostIPC; requestMemory / requestGPU / limitMemory are the container's
# resources (_helpers.tpl, chart.resources).
_STACK_FLAGS = {
    "maxModelLen": "--max-model-len",
    "dtype": "--dtype",
    "tensorParallelSize": "--tensor-parallel-size",
    "maxNumSeqs": "--max-num-seqs",
    "gpuMemoryUtilization": "--gpu-memory-utilization",
    "maxLoras": "--max-loras",
}


# lmcacheConfig keys the template copies into a variable, as written.
_STACK_LMCACHE_ENV = {
    "diskOffloadingBufferSize": "LMCACHE_MAX_LOCAL_DISK_SIZE",
    "nixlRole": "LMCACHE_NIXL_ROLE",
    "nixlPeerHost": "LMCACHE_NIXL_RECEIVER_HOST",
    "nixlPeerPort": "LMCACHE_NIXL_RECEIVER_PORT",
    "nixlBufferSize": "LMCACHE_NIXL_BUFFER_SIZE",
    "nixlBufferDevice": "LMCACHE_NIXL_BUFFER_DEVICE",
    "instanceId": "LMCACHE_LMCACHE_INSTANCE_ID",
    "workerPorts": "LMCACHE_LMCACHE_WORKER_PORTS",
    "p2pHost": "LMCACHE_P2P_HOST",
    "p2pInitPorts": "LMCACHE_P2P_INIT_PORTS",
    "cudaVisibleDevices": "CUDA_VISIBLE_DEVICES",
}


_STACK_LMCACHE_SWITCHES = {
    "enableNixl": "LMCACHE_ENABLE_NIXL",
    "nixlEnableGc": "LMCACHE_NIXL_ENABLE_GC",
    "enableController": "LMCACHE_ENABLE_CONTROLLER",
}


def _parse_helm_values(doc: Document, root: Located, reading: Reading) -> bool:
    """Values of the production-stack chart or of vLLM's example chart; false when neither."""
    deployment = reading.deployment
    stack = root.get("servingEngineSpec")
    if stack is not None and stack.get("modelSpec") is not None:
        cache_server = root.get("cacheserverSpec")
        api_key = values_secret_issue(doc, stack.get("vllmApiKey"), "servingEngineSpec.vllmApiKey")
        for spec in stack.get("modelSpec").items():
            engine = _stack_model_spec(doc, spec, cache_server, deployment.notes)
            _stack_claim(doc, spec, engine, deployment)
            # the chart makes a Secret of a string hf_token / vllmApiKey: the values file still holds it
            token = values_secret_issue(doc, spec.get("hf_token"), "hf_token")
            engine.hygiene += [issue for issue in (api_key, token) if issue is not None]
            deployment.workloads.append(engine)
        servers_before = len(deployment.cache_servers)
        if cache_server is not None:
            _stack_cache_server(doc, cache_server, reading)
        # a cache server read as an object of the deployment has its image judged as its own
        _stack_images(
            doc, root, deployment, ("routerSpec",) if len(deployment.cache_servers) > servers_before else None
        )
        return True
    image_values = root.get("image")
    if image_values is not None and image_values.get("command") is not None:
        workload = _example_chart_values(doc, root, image_values)
        if workload is None:
            return False
        deployment.workloads.append(workload)
        return True
    return False


def _stack_model_spec(doc: Document, spec: Located, cache_server: Located | None, notes: list[str]) -> Workload:
    """One ``servingEngineSpec.modelSpec`` entry of the production-stack chart, as its template renders it."""
    name = text_of(spec.get("name")) if spec.get("name") else "model"
    repo = text_of(spec.get("repository")) if spec.get("repository") else None
    tag = text_of(spec.get("tag")) if spec.get("tag") else None
    workload = Workload(
        name=f"servingEngineSpec.modelSpec {name}",
        file=doc.name,
        source="helm-values",
        image=f"{repo}:{tag}" if repo and tag else repo,
        image_location=node_location(doc, spec.get("tag") or spec.get("repository") or spec),
        location=node_location(doc, spec),
        replicas=whole_number(doc, spec.get("replicaCount"), "replicaCount", 0, 1_000_000, notes),
    )
    where = node_location(doc, spec)
    workload.env.append(EnvUse(name="PYTHONHASHSEED", value="123", location=where))
    url = spec.get("modelURL")
    if url is not None:
        workload.model, workload.model_location = text_of(url), node_location(doc, url)
    args = _stack_flags(doc, spec.get("vllmConfig"), where)
    lmcache = spec.get("lmcacheConfig")
    if lmcache is not None and isinstance(lmcache.value, dict):
        args += _stack_lmcache(doc, lmcache, workload, cache_server)
    for item in spec.get("env").items() if spec.get("env") else []:
        if item.get("name") is not None:
            value = item.get("value")
            workload.env.append(
                EnvUse(
                    name=text_of(item.get("name")),
                    value=text_of(value) if value is not None else None,
                    reference=None if value is not None else "valueFrom",
                    location=node_location(doc, item),
                )
            )
    _stack_resources(doc, spec, workload, notes)
    read_args(workload, args)
    return workload


def _stack_claim(doc: Document, spec: Located, workload: Workload, deployment: Deployment) -> None:
    """The claim the chart makes for a modelSpec with pvcStorage (helm/templates/pvc.yaml), mounted on /data by
    each of its replicas: accessModes from pvcAccessMode, else ReadWriteOnce."""
    storage = spec.get("pvcStorage")
    if storage is None:
        return
    name = f"{workload.name} storage claim"
    modes = spec.get("pvcAccessMode")
    deployment.claims.append(
        ClaimSpec(
            name=name,
            access_modes=[text_of(m) for m in modes.items()] if modes is not None else ["ReadWriteOnce"],
            location=node_location(doc, modes or storage),
        )
    )
    workload.claims.append(ClaimUse(claim=name, location=node_location(doc, storage)))


def _stack_images(doc: Document, root: Located, deployment: Deployment, keys: tuple[str, ...] | None = None) -> None:
    """The router's and the cache server's images, pulled beside the engines (repository and tag)."""
    for key in keys or ("routerSpec", "cacheserverSpec"):
        part = root.get(key)
        repo = part.get("repository") if part is not None else None
        tag = part.get("tag") if part is not None else None
        if repo is None or tag is None:  # the chart's own default tag then, not in these files
            continue
        found = image_issue(f"{text_of(repo)}:{text_of(tag)}", node_location(doc, tag), f"{key}: ")
        if found is not None:
            deployment.hygiene.append(found)


def _stack_flags(doc: Document, config: Located | None, where: Location) -> list[tuple[str, Location]]:
    """The flags the template writes from ``vllmConfig``."""
    if config is None or not isinstance(config.value, dict):
        return []
    args: list[tuple[str, Location]] = []
    chunked = config.get("enableChunkedPrefill")
    if chunked is not None:
        on = chunked.value is True or text_of(chunked).lower() == "true"
        args.append(("--enable-chunked-prefill" if on else "--no-enable-chunked-prefill", node_location(doc, chunked)))
    prefix = config.get("enablePrefixCaching")
    prefix_on = prefix is not None and (prefix.value is True or text_of(prefix).lower() == "true")
    args.append(
        (
            "--enable-prefix-caching" if prefix_on else "--no-enable-prefix-caching",
            node_location(doc, prefix) if prefix is not None else node_location(doc, config),
        )
    )
    for key, flag in _STACK_FLAGS.items():
        item = config.get(key)
        if item is not None:
            args += [(flag, node_location(doc, item)), (text_of(item), node_location(doc, item))]
    extra = config.get("extraArgs")
    return args + words_from_list(doc, extra.items() if extra else [], "")


def _stack_lmcache(
    doc: Document, lmcache: Located, workload: Workload, cache_server: Located | None
) -> list[tuple[str, Location]]:
    """The variables and --kv-transfer-config the template writes from ``lmcacheConfig``."""
    env = workload.env

    def setting(key: str) -> Located | None:
        found = lmcache.get(key)
        return found if isinstance(found, Located) else None

    def on(key: str) -> bool:
        item = setting(key)
        return item is not None and (item.value is True or text_of(item).lower() == "true")

    args: list[tuple[str, Location]] = []
    where = node_location(doc, setting("enabled") or lmcache)
    pd = setting("enablePD") is not None
    if on("enabled"):
        role = text_of(setting("kvRole")) if setting("kvRole") is not None else "kv_both"
        config: dict[str, Any] = {"kv_connector": "LMCacheConnectorV1", "kv_role": role}
        if pd:
            rpc = text_of(setting("nixlRole")) if setting("nixlRole") is not None else ""
            config["kv_connector_extra_config"] = {"discard_partial_chunks": False, "lmcache_rpc_port": rpc}
        args += [("--kv-transfer-config", where), (json.dumps(config), where)]
        env.append(EnvUse(name="LMCACHE_USE_EXPERIMENTAL", value="True", location=where))
    if on("enablePD"):
        pd_where = node_location(doc, setting("enablePD") or lmcache)
        workload.host_ipc = True
        env += [
            EnvUse(name="LMCACHE_LOCAL_CPU", value="False", location=pd_where),
            EnvUse(name="LMCACHE_MAX_LOCAL_CPU_SIZE", value="0", location=pd_where),
            EnvUse(name="LMCACHE_REMOTE_SERDE", value="NULL", location=pd_where),
        ]
    for key, variable in _STACK_LMCACHE_SWITCHES.items():
        switch = setting(key)
        if switch is not None:
            env.append(EnvUse(name=variable, value="True" if on(key) else "False", location=node_location(doc, switch)))
    size = setting("cpuOffloadingBufferSize")
    if size is not None and (parse_number(text_of(size)) or 0) > 0:
        env += [
            EnvUse(name="LMCACHE_LOCAL_CPU", value="True", location=node_location(doc, size)),
            EnvUse(name="LMCACHE_MAX_LOCAL_CPU_SIZE", value=text_of(size), location=node_location(doc, size)),
        ]
    for key, variable in _STACK_LMCACHE_ENV.items():
        item = setting(key)
        if item is not None:
            env.append(EnvUse(name=variable, value=text_of(item), location=node_location(doc, item)))
    if cache_server is not None:
        port = cache_server.get("servicePort")
        url = f"lm://<release>-cache-server-service:{text_of(port)}" if port is not None else None
        env.append(
            EnvUse(
                name="LMCACHE_REMOTE_URL",
                value=url,
                reference=None if url else "cacheserverSpec",
                location=node_location(doc, cache_server),
            )
        )
    return args


def _stack_cache_server(doc: Document, spec: Located, reading: Reading) -> None:
    """The LMCache server the production-stack chart starts from cacheserverSpec (templates/
    deployment-cache-server.yaml): `/opt/venv/bin/lmcache_server 0.0.0.0 containerPort` with the latest-nightly
    tag (the other tags run older servers, not read here), and its resources."""
    tag, port = spec.get("tag"), spec.get("containerPort")
    if tag is None or text_of(tag) != "latest-nightly" or port is None:
        return
    where = node_location(doc, tag)
    argv = [("/opt/venv/bin/lmcache_server", where), ("0.0.0.0", where), (text_of(port), node_location(doc, port))]
    found = cache_server_args(argv, reading.servers)
    if found is None:
        return
    repository = spec.get("repository")
    image = f"{text_of(repository)}:latest-nightly" if repository is not None else None
    server = cache_server(
        "cacheserverSpec", doc.name, found, node_location(doc, spec), image, [], "helm-values", image_location=where
    )
    resources = spec.get("resources")
    notes = reading.deployment.notes
    limits = resources.get("limits") if resources is not None else None
    requests = resources.get("requests") if resources is not None else None
    if limits is not None and limits.get("memory") is not None:
        server.memory_limit_gib = memory_limit(doc, limits.get("memory"), notes, "resources.limits.memory")
        server.memory_limit_location = node_location(doc, limits.get("memory"))
    if requests is not None and requests.get("memory") is not None:
        server.memory_request_gib = memory_limit(doc, requests.get("memory"), notes, "resources.requests.memory")
        server.memory_request_location = node_location(doc, requests.get("memory"))
    reading.deployment.cache_servers.append(server)


def _stack_resources(doc: Document, spec: Located, workload: Workload, notes: list[str]) -> None:
    """requestMemory, limitMemory, requestGPU and the /dev/shm the template mounts for tensorParallelSize."""
    if spec.get("requestMemory") is not None:
        workload.memory_request_gib = memory_limit(doc, spec.get("requestMemory"), notes, "requestMemory")
        workload.memory_request_location = node_location(doc, spec.get("requestMemory"))
    if spec.get("limitMemory") is not None:
        workload.memory_limit_gib = memory_limit(doc, spec.get("limitMemory"), notes, "limitMemory")
        workload.memory_limit_location = node_location(doc, spec.get("limitMemory"))
    # The chart's resources (chart.resources in templates/_helpers.tpl) request requestGPU of requestGPUType
    # (nvidia.com/gpu by default) only when requestGPU > 0: without it the pod gets no GPU resource.
    workload.gpus_stated = True
    workload.gpu_location = workload.memory_request_location or workload.memory_limit_location  # beside it
    if spec.get("requestGPU") is not None:
        workload.gpu_count = whole_number(doc, spec.get("requestGPU"), "requestGPU", 0, 1_000, notes, quantity=True)
        workload.gpu_location = node_location(doc, spec.get("requestGPU"))
        kind = spec.get("requestGPUType")
        workload.accelerator = text_of(kind) if kind is not None else "nvidia.com/gpu"
    config = spec.get("vllmConfig")
    if config is not None and config.get("tensorParallelSize") is not None:
        shm = spec.get("shmSize")
        workload.shm_mounted, workload.shm_gib = (
            True,
            memory_limit(doc, shm, notes, "shmSize") if shm is not None else 20.0,
        )


def _example_chart_values(doc: Document, root: Located, image_values: Located) -> Workload | None:
    """vLLM's example chart: ``image.command`` starts the server; None when it starts something else."""
    repo = image_values.get("repository")
    tag = image_values.get("tag")
    ref = f"{text_of(repo)}:{text_of(tag)}" if repo is not None and tag is not None else None
    argv = words_from_list(doc, image_values.each("command"), "")
    found = launch_from_argv(doc, argv, ref)
    if found is None:
        return None
    workload = Workload(
        name="image.command",
        installs=found.pins,
        file=doc.name,
        source="helm-values",
        image=ref,
        image_location=node_location(doc, tag or repo or image_values),
        env=found.env,
        location=node_location(doc, image_values),
    )
    for item in root.get("env").items() if root.get("env") else []:
        if item.get("name") is not None and item.get("value") is not None:
            workload.env.append(
                EnvUse(
                    name=text_of(item.get("name")), value=text_of(item.get("value")), location=node_location(doc, item)
                )
            )
    workload.hygiene += found.hygiene
    probe = liveness_issue(doc, root)  # the chart writes livenessProbe and startupProbe as given (chart.probes)
    if probe is not None:
        workload.hygiene.append(probe)
    read_args(workload, found.args, found.unresolved, found.emptied)
    return workload


class HelmValuesReader:
    """Values of the production-stack chart (``servingEngineSpec.modelSpec``) or of vLLM's example
    chart (``image.command``), in the first YAML document."""

    yaml = True
    partial = False

    def claims(self, doc: Document, roots: list[Located], reading: Reading) -> bool:
        found = mappings(roots)
        if not found:
            return False
        stack, image = found[0].get("servingEngineSpec"), found[0].get("image")
        return (stack is not None and stack.get("modelSpec") is not None) or (
            image is not None and image.get("command") is not None
        )

    def read(self, doc: Document, roots: list[Located], reading: Reading) -> bool:
        # False when the example chart's command starts something other than vLLM
        return _parse_helm_values(doc, mappings(roots)[0], reading)


READER = HelmValuesReader()
