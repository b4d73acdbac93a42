"""The plans of vLLM's own offloading: no offload, the CPU tier, and native tiering (CPU then disk,
object store or peers).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..knowledge import (
    TierKind,
    change_of,
)
from .common import (
    AdviceError,
)

if TYPE_CHECKING:  # jinja2 is imported on the first render, not at server start-up
    pass
from .render_models import GIB, Env, Port, number_text
from .render_plan import PlannerBase


class NativePlans(PlannerBase):
    """Backends none, native_cpu and native_tiering."""

    def _none(self) -> None:
        self.plan.components.append(self.vllm("vllm", "vLLM with GPU prefix caching only", None))

    def _native_cpu(self) -> None:
        self.cite("connector.offloading")
        gib = self.total_gib()
        assert gib is not None
        self._native_cpu_tier(gib)

    def _native_cpu_tier(self, gib: float) -> None:
        shorthand = self.available("flag.kv-offloading-size") and not self.pitfall_applies(
            "pitfall.native-backend-before-0.14"
        )
        if shorthand:
            flags = ["--kv-offloading-size", number_text(gib), "--kv-offloading-backend", "native"]
            self.plan.offloading_gib = gib
            if (
                self.pitfall_applies("pitfall.hma-flag-missing-with-shorthand")
                and self.hma("connector.offloading") == "no"
            ):
                flags.append("--disable-hybrid-kv-cache-manager")
                self.note(
                    "--disable-hybrid-kv-cache-manager", "set", "knowledge", "pitfall.hma-flag-missing-with-shorthand"
                )
            c = self.vllm("vllm", "vLLM with native CPU KV offload", None, flags)
            c.pinned_gib, c.shm_tier_gib = gib, self._shm_tier("cpu", gib)
            self.plan.components.append(c)
            return
        blocks = self.r.sizes.num_cpu_blocks
        if blocks is None:
            raise AdviceError(
                "sizes.num_cpu_blocks",
                f"vLLM {self.version} sizes the native CPU tier in blocks (num_cpu_blocks) and its offload shorthand "
                "does not work; give num_cpu_blocks (e.g. from size_offload), or use 0.14.0+",
            )
        self.note("num_cpu_blocks", blocks, "user")
        self.cite("spec.num-cpu-blocks")
        config = self.ktc("connector.offloading", "kv_both", {"num_cpu_blocks": blocks})
        c = self.vllm("vllm", "vLLM with native CPU KV offload", config)
        c.pinned_gib = gib  # before 0.14.0 the tier is a private pinned tensor per worker
        self.plan.components.append(c)

    def _tiers(self) -> list[TierKind]:
        if self.r.tiers is not None:
            self.note("tiers", ",".join(self.r.tiers), "user")
            return list(self.r.tiers)
        self.note("tiers", "fs", "default")
        return ["fs"]

    def _secondary(self, kinds: list[TierKind]) -> list[dict[str, Any]]:
        self.require("feature.native-multi-tier-offload", "native multi-tier offload (TieringOffloadingSpec)")
        tiers: list[dict[str, Any]] = []
        for kind in kinds:
            name = self.recipes.tier_type(kind, self.version)
            feature = self.recipes.tier_names_entry(kind).feature
            self.require(feature, f"the {kind} secondary tier", "tiers")
            assert name is not None
            self.note(f"secondary_tiers[{kind}].type", name, "knowledge", "tier type name registered in this release")
            self.cite("spec.tier.type")
            if kind == "fs":
                if len(self.r.paths.disk) != 1:
                    raise AdviceError("paths.disk", "the fs tier takes exactly one root directory")
                tiers.append({"type": name, "root_dir": self.r.paths.disk[0]})
                self.note("root_dir", self.r.paths.disk[0], "user")
            elif kind == "obj":
                store = self.r.object_store
                if store is None:
                    raise AdviceError("object_store", "the obj tier needs bucket and endpoint_override")
                tier: dict[str, Any] = {
                    "type": name,
                    "store_config": {"bucket": store.bucket, "endpoint_override": store.endpoint_override},
                }
                if store.prefix:
                    tier["prefix"] = store.prefix
                tiers.append(tier)
                optional_keys = change_of(self.gated(feature).changes, "keys-optional")
                if optional_keys and self.version < optional_keys.version:
                    self.plan.notes.append(
                        f"vLLM {self.version} needs access_key and secret_key in store_config (optional from "
                        f"{optional_keys.version}); add them from your secret store — they are never rendered here."
                    )
            else:
                entry: dict[str, Any] = {"type": name}
                if not self.available("env.vllm-p2p-side-channel-host"):
                    entry["host"] = self.host(self.r.hosts.this_instance, "this_instance", "instance")
                tiers.append(entry)
        return tiers

    def _native_tiering(self) -> None:
        self.cite("connector.offloading")
        kinds = self._tiers()
        tiers = self._secondary(kinds)
        spec = {"spec_name": "TieringOffloadingSpec", "cpu_bytes_to_use": self.cpu_bytes(), "secondary_tiers": tiers}
        self.cite("spec.spec-name")
        c = self.vllm(
            "vllm", "vLLM with native multi-tier KV offload", self.ktc("connector.offloading", "kv_both", spec)
        )
        gib = self.plan.cpu_bytes / GIB if self.plan.cpu_bytes else 0.0
        c.pinned_gib, c.shm_tier_gib = gib, self._shm_tier("tiering", gib)
        if "fs" in kinds:
            shared = self.kube and self.r.shared_tier_volume == "pvc"
            if shared:
                c.shared_mounts = list(self.r.paths.disk)
                self.note(
                    "fs tier volume",
                    f"PersistentVolumeClaim {self.name}-kv-tier, ReadWriteMany, {self.shared_tier_gib()} GiB",
                    "user" if self.r.sizes.disk_gib is not None else "default",
                    "set sizes.disk_gib to size it; its storage class must offer ReadWriteMany",
                )
            else:
                c.mounts = list(self.r.paths.disk)
        # Blocks in a secondary tier outlive the process: finding them again after a restart, or from
        # another instance, needs the same block hashes, i.e. one fixed seed where vLLM has none.
        if kinds and not self.available("feature.prefix-hash-fixed-default-seed"):
            c.env.append(Env("PYTHONHASHSEED", "0"))
            self.note(
                "PYTHONHASHSEED", "0", "knowledge", "pitfall.shared-tier-without-hash-seed: same on every instance"
            )
            self.cite("pitfall.shared-tier-without-hash-seed")
        if "p2p" in kinds:
            port = self._p2p_tier_port()
            if self.available("env.vllm-p2p-side-channel-host"):
                host = self.host(self.r.hosts.this_instance, "this_instance", "instance")
                c.env.append(Env("VLLM_P2P_SIDE_CHANNEL_HOST", host, "status.podIP" if self.kube else None))
            c.ports.append(Port("p2p", port))
            c.service = "headless"
            c.replicas = 2
            c.pod_ip = self.kube and not self.available("env.vllm-p2p-side-channel-host")
        self.plan.components.append(c)
