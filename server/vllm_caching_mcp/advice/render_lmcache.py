"""The plans of LMCache: in-process, peer-to-peer with its controller, and the multi-process server."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ..knowledge import (
    LmcacheControllerCommand,
    change_of,
)
from .common import (
    AdviceError,
)

if TYPE_CHECKING:  # jinja2 is imported on the first render, not at server start-up
    pass
from .render_models import Component, Env, Port, env_value, in_dir, lmcache_list, number_text, port_list, typed_value
from .render_plan import PlannerBase


class LMCachePlans(PlannerBase):
    """Backends lmcache, lmcache_p2p and lmcache_mp."""

    def _lmcache_env(self, component: Component, per_rank: float) -> dict[str, Any]:
        """LMCache settings for in-process LMCache, as both env and the YAML config."""
        assert self.lm_version is not None
        config: dict[str, Any] = {"local_cpu": True, "max_local_cpu_size": per_rank}
        self.cite("lmcache.max_local_cpu_size")
        self.cite("pitfall.lmcache-local-cpu-false")
        if self.r.paths.disk:
            disk_gib = self.r.sizes.disk_gib
            if disk_gib is None:
                raise AdviceError("sizes.disk_gib", "give the LMCache disk tier size in GiB per worker")
            many = change_of(self.gated("lmcache.local_disk").changes, "path-list")
            if len(self.r.paths.disk) > 1 and many and self.lm_version < many.version:
                raise AdviceError(
                    "paths.disk", f"LMCache {self.lm_version} takes one disk path; a list needs {many.version}+"
                )
            config["local_disk"] = lmcache_list("disk", [f"file://{p}" for p in self.r.paths.disk])
            config["max_local_disk_size"] = disk_gib
            self.note("max_local_disk_size", disk_gib, "user", "GiB per worker process")
            component.mounts += self.r.paths.disk
            self.cite("pitfall.lmcache-async-loading-with-disk")
        if self.r.paths.gds:
            buffer = self.r.sizes.gds_buffer_mib
            if buffer is None:
                raise AdviceError("sizes.gds_buffer_mib", "the GDS tier needs its staging buffer size in MiB")
            key = (
                "gds_buffer_size"
                if self.available("lmcache.gds_buffer_size", self.lm_version)
                else "cufile_buffer_size"
            )
            config["gds_path"] = lmcache_list("gds", self.r.paths.gds)
            config[key] = buffer
            self.note(key, buffer, "user", "MiB (not bytes)")
            component.mounts += self.r.paths.gds
        return config

    def _lmcache(self) -> None:
        self.cite("connector.lmcache")
        gib = self.total_gib()
        assert gib is not None
        per_rank = self.r.sizes.lmcache_max_local_cpu_size_gib or gib / (self.tp * self.pp)
        self.plan.lmcache_per_rank_gib = per_rank
        self.note("LMCACHE_MAX_LOCAL_CPU_SIZE", number_text(per_rank), "computed", "GiB per worker = total ÷ (TP × PP)")
        c = self.vllm("vllm", "vLLM with in-process LMCache", self.ktc("connector.lmcache", "kv_both"))
        c.pinned_gib = per_rank * self.tp * self.pp
        config = self._lmcache_env(c, per_rank)
        self._attach_lmcache(c, config)
        self.plan.components.append(c)

    def _attach_lmcache(self, c: Component, config: dict[str, Any]) -> None:
        c.lmcache_config = config
        if self.r.format == "lmcache_yaml":
            return
        for key, value in config.items():
            if isinstance(value, Env):
                c.env.append(Env(f"LMCACHE_{key.upper()}", value.value, value.field))
            else:
                c.env.append(Env(f"LMCACHE_{key.upper()}", env_value(value)))

    def _lmcache_p2p(self) -> None:
        self.cite("connector.lmcache")
        gib = self.total_gib()
        assert gib is not None
        per_rank = self.r.sizes.lmcache_max_local_cpu_size_gib or gib / (self.tp * self.pp)
        self.plan.lmcache_per_rank_gib = per_rank
        ctrl_host = (
            f"{self.name}-lmcache-controller" + (f".{self.r.namespace}.svc" if self.r.namespace else "")
            if self.kube
            else (self.r.hosts.controller or "localhost")
        )
        self.note(
            "controller host",
            ctrl_host,
            "computed" if self.kube else ("user" if self.r.hosts.controller else "default"),
        )
        controller = self.recipes.facts.lmcache_controller
        count = 1 if self.kube else self.r.instances
        components = [self._lmcache_peer(i, per_rank, ctrl_host, controller) for i in range(count)]
        components.append(self._lmcache_controller(controller))
        self.cite("pitfall.lmcache-p2p-incomplete")
        self.plan.components += components

    def _lmcache_peer(self, i: int, per_rank: float, ctrl_host: str, controller: LmcacheControllerCommand) -> Component:
        """vLLM instance ``i`` of an LMCache P2P group: every setting LMCache asserts for P2P, and its own ports."""
        name = "vllm" if self.kube else f"vllm-{i}"
        c = self.vllm(name, "vLLM with LMCache P2P sharing", self.ktc("connector.lmcache", "kv_both"))
        ranks = self.tp * self.pp
        c.pinned_gib = per_rank * ranks
        config = self._lmcache_env(c, per_rank)
        for e in self.recipes.recipe("lmcache_p2p").required_env:
            self.cite(e.setting)
            config[e.name.removeprefix("LMCACHE_").lower()] = typed_value(e.value)
        base = self.facts.lmcache_p2p_ports.base
        init_ports, lookup_ports, worker_ports = (self.ports_on(None).block(base, ranks) for _ in range(3))
        config |= {
            "controller_pull_url": f"{ctrl_host}:{controller.pull_port}",
            "controller_reply_url": f"{ctrl_host}:{controller.reply_port}",
            "lmcache_worker_ports": port_list(worker_ports),
            "p2p_init_ports": port_list(init_ports),
            "p2p_lookup_ports": port_list(lookup_ports),
            "p2p_host": Env(
                "",
                self.host(self.r.hosts.this_instance, "this_instance", "instance"),
                "status.podIP" if self.kube else None,
            ),
            "lmcache_instance_id": Env("", f"{self.name}-{i}", "metadata.name" if self.kube else None),
        }
        self.note("p2p ports", config["p2p_init_ports"], "computed", "one per worker rank (TP × PP)")
        c.env.append(Env("PYTHONHASHSEED", "0"))
        c.ports += [Port(f"p2p-{r}", port) for r, port in enumerate(init_ports[:4])]
        if not self.kube:  # every port it listens on, for the one-host check
            c.ports += [Port(f"lookup-{r}", port) for r, port in enumerate(lookup_ports)]
            c.ports += [Port(f"worker-{r}", port) for r, port in enumerate(worker_ports)]
            c.ports += [Port(f"p2p-{r}", port) for r, port in enumerate(init_ports[4:], start=4)]
        c.service, c.replicas = "headless", self.r.instances
        self._attach_lmcache(c, config)
        if self.r.format == "lmcache_yaml":
            c.lmcache_config = {k: (v.value if isinstance(v, Env) else v) for k, v in config.items()}
        return c

    def _lmcache_helper_image(self) -> tuple[str, str]:
        """The image of the LMCache controller or server, and the directory its commands are run from
        ('' for the caller's image or a host install: on PATH)."""
        if self.r.lmcache_image is not None:
            return self.r.lmcache_image, ""
        if self.r.format not in ("docker_run", "kubernetes"):
            return self.image, ""
        fact = self.facts.lmcache_image
        self.cite_fact("lmcache_image")
        self.note("lmcache_image", fact.image, "knowledge", "LMCache's own image; pin one through lmcache_image")
        self.cite("feature.release-image-kv-connectors")
        self.plan.notes.append(
            f"The LMCache helpers run from {fact.image}, LMCache's own image: the vllm/vllm-openai release images "
            "carry LMCache (built with INSTALL_KV_CONNECTORS=true) but not a release their tag names; the nightly "
            f"tag moves, so pin one with LMCache {self.lm_version} through lmcache_image. A vLLM image built "
            "without INSTALL_KV_CONNECTORS needs LMCache installed for the connector."
        )
        return fact.image, fact.bin_dir + "/"

    def _lmcache_controller(self, controller: LmcacheControllerCommand) -> Component:
        monitor = json.dumps({"pull": controller.pull_port, "reply": controller.reply_port})
        image, bin_dir = self._lmcache_helper_image()
        return Component(
            name="lmcache-controller",
            description="LMCache controller: tracks which instance holds which chunks",
            argv=[
                *in_dir(bin_dir, controller.command),
                "--host",
                "0.0.0.0",
                "--port",
                str(controller.http_port),
                "--monitor-ports",
                monitor,
            ],
            image=image,
            kind="helper",
            ports=[
                Port("http", controller.http_port),
                Port("pull", controller.pull_port),
                Port("reply", controller.reply_port),
            ],
            service="cluster",
        )

    def _lmcache_mp(self) -> None:
        self.cite("connector.lmcache-mp")
        assert self.lm_version is not None
        server, address = self.recipes.facts.lmcache_server, self.recipes.facts.lmcache_mp_address
        l1 = self.r.sizes.lmcache_server_l1_gib or self.total_gib()
        self.note("--l1-size-gb", l1, "user", "GiB, one pool for every vLLM on the node")
        self.cite("lmcache.mp_server.l1_size_gb")
        port = address.port
        host = self.host_ip if self.kube else (self.r.hosts.lmcache_server or "localhost")
        config = self.ktc(
            "connector.lmcache-mp", "kv_both", {address.host_key: f"tcp://{host}", address.port_key: port}
        )
        c = self.vllm("vllm", "vLLM connected to the node's LMCache server", config)
        c.host_ip, c.shm = self.kube, True
        # In Docker, localhost is the host's only on the host's network, where the server listens.
        c.host_network = self.r.format == "docker_run"
        image, bin_dir = self._lmcache_helper_image()
        if self.pitfall_applies("pitfall.lmcache-backend-means-mp-server"):
            self.plan.notes.append(
                "Written as an explicit LMCacheMPConnector config; --kv-offloading-size is not passed on to it."
            )
        self.plan.components += [
            Component(
                name="lmcache-server",
                description="LMCache MP server: one shared KV pool per node",
                argv=[
                    *in_dir(bin_dir, server.command_for(self.lm_version)),
                    "--host",
                    "0.0.0.0",
                    "--port",
                    str(port),
                    "--l1-size-gb",
                    number_text(l1 or 0),
                    "--eviction-policy",
                    server.eviction_policy,
                ],
                image=image,
                kind="helper",
                ports=[Port("zmq", port)],
                host_network=True,
                shm=True,
                pinned_gib=l1 or 0.0,
            ),
            c,
        ]
