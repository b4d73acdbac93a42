"""choose_backend: which KV caching backend fits a deployment, and why.

The questions are asked in this order, with the answers gated by release from the knowledge:
prefill/decode disaggregation (NIXL, Mooncake, or a MultiConnector that adds a local CPU tier);
a cache shared between instances (native fs or p2p tier, LMCache MP, LMCache P2P); LMCache-only
needs; tiers beyond DRAM (native multi-tier from 0.22.0, else LMCache); DRAM only (native CPU
offload). Hybrid-attention and sliding-window models add a question of their own: does the
chosen connector keep the hybrid KV cache manager in this release? Every boundary comes from a
knowledge entry, and each one the answer depended on is reported with the entry that states it.

The pitfalls to avoid are the recipe's review rules, each tested against what was chosen
(connector, shorthand, spec, tiers, model, release, parallelism): a rule the choice rules out is
not listed, one it meets outright keeps its severity, and one that also depends on settings the
choice does not make is a check that says which.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, Field

from ..knowledge import (
    Backend,
    Bug,
    CompatPin,
    Condition,
    Connector,
    Fabric,
    Feature,
    Gated,
    Knowledge,
    Pitfall,
    Recipe,
    Recipes,
    RequirementKind,
    SecondaryTier,
    Setting,
    Severity,
    TierKind,
)
from ..safe_text import join_lines
from ..versions import Version, as_text, contains, in_range, parse_specifier
from . import ports
from .common import (
    AdviceError,
    Citation,
    Result,
    SecurityCheck,
    ToolSpec,
    VersionContext,
    backend_facts,
    cite,
    first_few,
    resolve_version,
    security_check,
)

Tier = Literal["cpu", SecondaryTier]


class Topology(BaseModel):
    nodes: int = Field(default=1, ge=1, le=10000)
    gpus_per_node: int = Field(default=8, ge=1, le=64)
    tensor_parallel_size: int = Field(default=1, ge=1, le=64)
    pipeline_parallel_size: int = Field(default=1, ge=1, le=64)
    data_parallel_size: int = Field(default=1, ge=1, le=1024)
    instances_per_node: int = Field(default=1, ge=1, le=64)
    share_cache_across_instances: bool = Field(default=False, description="one logical cache across instances")


class ModelTraits(BaseModel):
    hybrid_attention: bool = Field(default=False, description="linear/Mamba or chunked-local beside full attention")
    sliding_window: bool = Field(default=False, description="sliding-window beside full-attention layers")
    mla: bool = Field(default=False, description="DeepSeek-style latent attention")


class Constraints(BaseModel):
    no_extra_pods: bool = Field(default=False)
    lmcache_features: bool = Field(default=False, description="CacheBlend or the LMCache controller")
    share_with_sglang: bool = Field(default=False)
    gpudirect_storage: bool = Field(default=False, description="cuFile to NVMe")
    isolate_cache_from_engine: bool = Field(default=False, description="cache work outside the vLLM process")


class ChooseBackendRequest(BaseModel):
    version: str | None = Field(default=None, max_length=40)
    lmcache_version: str | None = Field(default=None, max_length=40)
    topology: Topology = Field(default_factory=Topology)
    tiers: list[Tier] = Field(
        default_factory=lambda: list[Tier](["cpu"]),
        max_length=4,
        description="beyond GPU memory; [] = GPU only",
    )
    pd_disaggregation: bool = Field(default=False)
    fabric: Fabric | None = Field(default=None)
    model: str | None = Field(default=None, max_length=200, description="id, name or repo from the knowledge")
    traits: ModelTraits | None = Field(default=None, description="override the model's traits")
    constraints: Constraints = Field(default_factory=Constraints)


class Recommendation(BaseModel):
    backend: Backend
    title: str
    connector: str | None
    spec: str | None
    tiers: list[str] = Field(description="tiers in order, with the secondary-tier type names of this release")
    roles: list[str]
    summary: str


class Step(BaseModel):
    question: str
    answer: str
    decided: bool = Field(description="true for the question that settled the backend")


class Alternative(BaseModel):
    backend: Backend
    title: str
    why_not: str


class Requirement(BaseModel):
    kind: RequirementKind
    name: str
    value: str | None = None
    why: str
    source: str | None = Field(default=None, description="knowledge entry id")


class AvoidNote(BaseModel):
    id: str
    title: str
    severity: Severity = Field(description="the rule's severity where it holds; a check is at most a warning")
    rule_severity: Severity = Field(description="the rule's own severity, for when a check turns out to hold")
    holds: Literal["yes", "check"] = Field(
        description="yes: the recommended setup meets the rule's conditions as chosen; check: it holds only if the "
        "configuration also meets the conditions in `check`"
    )
    check: str | None = Field(default=None, description="what else must be true for the rule to hold (for a check)")
    fix: str
    why: str = Field(description="why the rule holds: the mechanism in vLLM or LMCache that makes this a problem")
    premises: list[str] = Field(
        default_factory=list, description="the knowledge entries (facts checked against the wheels) the reason rests on"
    )
    sources: list[str] = Field(description="where the rule is read from (wheel paths and lines, issues)")


class VersionGate(BaseModel):
    id: str
    name: str
    first_release: str | None = Field(description="first release with it (null: in every covered release)")
    removed_in: str | None = None
    present: bool = Field(description="whether the release asked about has it")
    effect: str = Field(description="what it changed in this answer")


class BugNote(BaseModel):
    id: str
    title: str
    status: Literal["open", "closed_without_fix", "fixed_in_later_release"]
    state: str
    state_reason: str | None
    checked_at: str
    fixed_in: str | None
    avoidance: str


class ChooseBackendResult(Result):
    version_context: VersionContext
    lmcache_context: VersionContext | None = None
    model: str | None = Field(description="the knowledge entry the model name resolved to")
    traits: ModelTraits
    recommendation: Recommendation
    decision_path: list[Step]
    alternatives: list[Alternative]
    requirements: list[Requirement]
    avoid: list[AvoidNote]
    version_gates: list[VersionGate]
    bugs: list[BugNote]
    notes: list[str]
    citations: list[Citation]
    security: SecurityCheck | None = Field(
        default=None,
        description="known advisories for the release on the chosen backend and the security floor (stored snapshot)",
    )
    lmcache_security: SecurityCheck | None = Field(default=None, description="the same for the LMCache release")

    def summary(self) -> str:
        r = self.recommendation
        lines = [
            f"vLLM {self.version_context.version}"
            + (" (assumed)" if self.version_context.assumed else "")
            + f": {r.title}",
            f"  connector: {r.connector or '-'}   spec: {r.spec or '-'}   tiers: {' → '.join(r.tiers) or 'GPU only'}",
        ]
        decided = next((s for s in self.decision_path if s.decided), None)
        if decided:
            lines.append(f"  decided by: {decided.question} → {decided.answer}")
        lines += [f"  needs {q.kind}: {q.name}{'=' + q.value if q.value else ''}" for q in self.requirements]
        lines += [f"  gate {g.id} ({g.first_release or 'always'}): {g.effect}" for g in self.version_gates]
        lines += [f"  avoid: {a.title}" for a in self.avoid if a.severity == "error"]
        lines += [f"  check: {a.title}" for a in self.avoid if a.holds == "check" and a.rule_severity == "error"]
        lines += [f"  bug {b.id} [{b.status}]: {b.title}" for b in self.bugs]
        lines += [f"  instead: {a.title}: {a.why_not}" for a in self.alternatives[:3]]
        lines += [f"  note: {n}" for n in self.notes]
        lines += [check.lines()[0] for check in (self.security, self.lmcache_security) if check is not None]
        for ctx in (self.version_context, self.lmcache_context):
            if ctx is not None:
                lines += [f"warning: {w}" for w in ctx.warnings]
        return join_lines(lines)


# ---------------------------------------------------------------------------------------------


def resolve_model(knowledge: Knowledge, name: str) -> tuple[str, ModelTraits]:
    """Find ``name`` among the knowledge's models (id, name, repo, aliases) and read its traits."""
    m = knowledge.find_model(name)
    if m is not None:
        sliding = m.sliding_window_layers
        return m.id, ModelTraits(
            hybrid_attention=bool(m.linear_attention_layers or m.chunked_local_layers),
            # A model whose every layer slides has one KV group; only a mix needs HMA.
            sliding_window=bool(sliding) and sliding < m.num_layers,
            mla=m.attention == "mla",
        )
    known = ", ".join(m.id for m in knowledge.models[:12]) or "none yet"
    raise AdviceError(
        "model",
        f"{name!r} is not a model in the knowledge (known: {known}); give its traits instead "
        "(traits: hybrid_attention, sliding_window, mla)",
    )


class _Chooser:
    """One decision: the state the questions share while they are asked."""

    def __init__(self, request: ChooseBackendRequest, knowledge: Knowledge, recipes: Recipes) -> None:
        self.request = request
        self.k = knowledge
        self.recipes = recipes
        self.version, self.context = resolve_version(knowledge, request.version)
        self.path: list[Step] = []
        self.gates: dict[str, VersionGate] = {}
        self.alternatives: list[Alternative] = []
        self.notes: list[str] = []
        self.cited: dict[str, Citation] = {}
        self.tier_kinds: list[TierKind] = []
        self.model_id: str | None = None
        self.traits = ModelTraits()
        if request.model:
            self.model_id, self.traits = resolve_model(knowledge, request.model)
            self.cite(self.model_id)
        if request.traits is not None:
            self.traits = request.traits
        self.needs_hma = self.traits.hybrid_attention or self.traits.sliding_window

    # -- knowledge look-ups ---------------------------------------------------------------
    def cite(self, entry_id: str) -> None:
        entry = self.k.by_id.get(entry_id)
        if entry is not None and entry_id not in self.cited:
            self.cited[entry_id] = cite(entry_id, entry, self.k)

    def gated(self, entry_id: str) -> Gated:
        entry = self.k.by_id[entry_id]
        assert isinstance(entry, Gated), entry_id
        return entry

    def has(self, entry_id: str, effect_if_missing: str = "", effect_if_present: str = "") -> bool:
        """Whether the release has the entry; records it as a gate when an effect is given."""
        entry = self.gated(entry_id)
        present = entry.status_at(self.version) in ("available", "deprecated")
        effect = effect_if_present if present else effect_if_missing
        if effect:
            self.gates[entry_id] = VersionGate(
                id=entry_id,
                name=entry.name,
                first_release=as_text(entry.introduced),
                removed_in=as_text(entry.removed),
                present=present,
                effect=effect,
            )
            self.cite(entry_id)
        return present

    def hma(self, connector_id: str) -> str:
        entry = self.gated(connector_id)
        assert isinstance(entry, Connector)
        return entry.hma_at(self.version) or "no"

    def hma_boundary(self, connector_id: str) -> str | None:
        """The first release in which the connector supports HMA, from its ranges."""
        entry = self.gated(connector_id)
        assert isinstance(entry, Connector)
        for r in entry.hma:
            if r.value in ("yes", "conditional"):
                spec = parse_specifier(r.versions)
                lows = [s.version for s in spec if s.operator in (">=", "==")]
                return lows[0] if lows else None
        return None

    def keeps_hma(self, connector_id: str) -> bool:
        """Whether this connector lets a hybrid/sliding model keep HMA here; records the gate."""
        value = self.hma(connector_id)
        name = self.gated(connector_id).name
        first = self.hma_boundary(connector_id)
        if not self.needs_hma:
            return True
        if value == "yes":
            effect = f"{name} supports the hybrid KV cache manager here, so the model keeps its HMA memory savings"
        elif value == "conditional":
            effect = f"{name} keeps HMA only under the conditions its HMA note gives (see the connector entry)"
        else:
            later = f"; it does from {first}" if first else ""
            effect = f"{name} does not support the hybrid KV cache manager in {self.version}{later}"
        self.gates[f"{connector_id}#hma"] = VersionGate(
            id=connector_id, name=f"{name} HMA support", first_release=first, present=value != "no", effect=effect
        )
        self.cite(connector_id)
        return value != "no"

    def ask(self, question: str, answer: str, decided: bool = False) -> None:
        self.path.append(Step(question=question, answer=answer, decided=decided))

    def reject(self, backend: Backend, why_not: str) -> None:
        if backend not in {a.backend for a in self.alternatives}:
            self.alternatives.append(
                Alternative(backend=backend, title=self.recipes.recipe(backend).title, why_not=why_not)
            )

    # -- the questions ----------------------------------------------------------------------
    def decide(self) -> Backend:
        r, t, c = self.request, self.request.topology, self.request.constraints
        tiers = set(r.tiers)
        if r.pd_disaggregation:
            return self._disaggregated(tiers)
        self.ask("Prefill/decode disaggregation?", "no")
        sharing = (t.share_cache_across_instances and (t.instances_per_node > 1 or t.nodes > 1)) or (
            c.isolate_cache_from_engine
        )
        if not tiers and not sharing:
            self.ask("Any tier beyond GPU memory?", "no: GPU prefix caching only", decided=True)
            self.reject("native_cpu", "not asked for; add it when GPU memory cannot hold the reused prefixes")
            return "none"
        if sharing:
            return self._shared(tiers)
        self.ask("Must instances share one cache, or cache work leave the vLLM process?", "no")
        if c.lmcache_features or c.share_with_sglang or c.gpudirect_storage:
            return self._lmcache_only(tiers)
        self.ask("Needs an LMCache-only feature, GDS, or a cache shared with SGLang?", "no")
        beyond: list[SecondaryTier] = [x for x in r.tiers if x != "cpu"]
        if beyond:
            return self._more_tiers(beyond)
        self.ask("Tiers beyond CPU DRAM (NVMe, object store, peers)?", "no")
        return self._cpu_only()

    def _cpu_only(self) -> Backend:
        has_native = self.has(
            "feature.native-cpu-kv-offload", effect_if_missing="native CPU offload is not in this release"
        )
        if self.needs_hma and not self.keeps_hma("connector.offloading"):
            simple = self.has("connector.simple-cpu-offload") and self.hma("connector.simple-cpu-offload") == "yes"
            self.ask(
                "CPU DRAM tier only; does native offload keep HMA for this model here?",
                "no: OffloadingConnector does not; SimpleCPUOffloadConnector does, as a note says"
                if simple
                else "no: no connector in this release offloads a hybrid/sliding-window model with HMA on",
                decided=True,
            )
            if simple:
                self.cite("connector.simple-cpu-offload")
                self.cite("env.vllm-use-simple-kv-offload")
                self.notes.append(
                    "SimpleCPUOffloadConnector supports the hybrid KV cache manager here: set "
                    "VLLM_USE_SIMPLE_KV_OFFLOAD=1 with --kv-offloading-size and the native backend selects it "
                    "instead of OffloadingConnector (env.vllm-use-simple-kv-offload; a minimal connector with its "
                    "own LRU pool, not the recipe render_config writes)."
                )
            self.reject(
                "native_cpu",
                f"OffloadingConnector lacks HMA support in {self.version}; the model would fail to start or lose "
                f"its hybrid memory layout — upgrade to {self.hma_boundary('connector.offloading')} or newer",
            )
            self.reject("lmcache", "LMCacheConnectorV1 never supports HMA (pitfall.lmcache-v1-hybrid-model)")
            until = (
                "SimpleCPUOffloadConnector as above, or GPU prefix caching only"
                if simple
                else "GPU prefix caching only"
            )
            self.notes.append(
                f"Upgrade to vLLM {self.hma_boundary('connector.offloading')}+ for OffloadingConnector's CPU "
                f"offload of this model; until then, {until}."
            )
            return "none"
        self.ask("CPU DRAM tier only?", "yes: native CPU offload (OffloadingConnector)", decided=has_native)
        self.reject("lmcache", "adds a package and per-rank sizing for no gain when DRAM is the only tier")
        self.reject("lmcache_mp", "adds an LMCache server process; only worth it for a cache shared between instances")
        return "native_cpu"

    def _more_tiers(self, beyond: list[SecondaryTier]) -> Backend:  # beyond: the tiers other than cpu
        kinds = [self.recipes.tier_serving(x).kind for x in beyond]
        has_tiering = self.has(
            "feature.native-multi-tier-offload",
            effect_if_missing="no native multi-tier offload in this release: a disk, object or peer tier needs "
            "LMCache, or an upgrade",
            effect_if_present="native TieringOffloadingSpec can carry the extra tiers without LMCache",
        )
        missing = []
        for kind in kinds:
            feature = self.recipes.tier_names_entry(kind).feature
            entry = self.gated(feature)
            name = self.recipes.tier_type(kind, self.version)
            present = self.has(
                feature,
                effect_if_missing=f"the {kind} tier first ships in {entry.introduced}",
                effect_if_present=f"secondary tier type {name!r} is registered in this release",
            )
            ok = has_tiering and name is not None and present
            if not ok:
                missing.append((kind, entry))
        hma_ok = self.keeps_hma("connector.offloading") if has_tiering else True
        if not missing and hma_ok:
            self.tier_kinds = kinds
            self.ask(
                "Tiers beyond CPU DRAM on one node?",
                f"yes ({', '.join(beyond)}): native TieringOffloadingSpec",
                decided=True,
            )
            self.reject(
                "lmcache", "a second cache implementation to keep in step with vLLM; native tiers need no extra package"
            )
            return "native_tiering"
        first_needed = max(
            (e.introduced for _, e in missing if e.introduced),
            default=self.gated("feature.native-multi-tier-offload").introduced or Version("0"),
        )
        self.reject(
            "native_tiering",
            f"this release lacks {', '.join(k for k, _ in missing) or 'HMA for this model'}; "
            f"upgrade to {first_needed}+",
        )
        if self.needs_hma:
            self.reject("lmcache", "LMCacheConnectorV1 cannot serve hybrid/sliding-window models (LMCache#3106)")
            self.ask(
                "Tiers beyond CPU DRAM, for a hybrid/sliding-window model, on a release without them?",
                "keep DRAM only (native CPU offload) until an upgrade brings the tier",
                decided=True,
            )
            self.notes.append(f"The wanted tiers need vLLM {first_needed}+ for this model.")
            return self._cpu_only()
        self.ask(
            "Tiers beyond CPU DRAM on one node?",
            f"yes, but {self.version} has no native {', '.join(k for k, _ in missing)} tier: LMCache in-process",
            decided=True,
        )
        if "obj" in [k for k, _ in missing] or "p2p" in [k for k, _ in missing]:
            self.notes.append(
                "LMCache reaches object stores through a remote backend (LMCACHE_REMOTE_URL) and peers through its "
                "P2P mode; render_config writes the DRAM and disk tiers."
            )
        return "lmcache"

    def _lmcache_only(self, tiers: set[Tier]) -> Backend:
        c = self.request.constraints
        why = ", ".join(
            w
            for w, on in (
                ("LMCache-only features", c.lmcache_features),
                ("a cache shared with SGLang", c.share_with_sglang),
                ("GPUDirect Storage", c.gpudirect_storage),
            )
            if on
        )
        self.reject("native_cpu", f"native offload has no {why}")
        self.reject("native_tiering", f"native tiers have no {why}")
        if self.needs_hma:
            self.reject("lmcache", "LMCacheConnectorV1 does not support HMA: hybrid/sliding models fail (LMCache#3106)")
            mp_ok = self.has("connector.lmcache-mp", effect_if_missing="LMCacheMPConnector is not in this release")
            if mp_ok and self.keeps_hma("connector.lmcache-mp"):
                self.ask(f"Needs {why}, with a hybrid/sliding-window model?", "LMCache MP (HMA-capable)", decided=True)
                self.notes.append(
                    "Check that the LMCache feature you need is offered in multi-process mode; the in-process "
                    "connector that has every feature cannot serve this model."
                )
                return "lmcache_mp"
            self.ask(
                f"Needs {why}, with a hybrid/sliding-window model?", "no LMCache path keeps HMA here", decided=True
            )
            self.notes.append(
                "No LMCache connector keeps HMA in this release; native offload is the only offload path."
            )
            return self._cpu_only()
        self.ask(f"Needs {why}?", "yes: LMCache in-process (LMCacheConnectorV1)", decided=True)
        return "lmcache"

    def _shared(self, tiers: set[Tier]) -> Backend:
        if self.request.topology.nodes > 1 or "peers" in tiers:
            return self._shared_across_nodes(tiers)
        return self._shared_on_one_node()

    def _shared_across_nodes(self, tiers: set[Tier]) -> Backend:
        """Instances on several machines share one cache: the native p2p tier, else LMCache P2P."""
        c = self.request.constraints
        has_p2p = self.has(
            "feature.tier-p2p",
            effect_if_missing="no native p2p tier before this feature's release: peer sharing needs LMCache P2P",
            effect_if_present="the native p2p tier shares CPU-tier blocks between instances over NIXL",
        ) and self.has("feature.native-multi-tier-offload")
        if has_p2p and not c.lmcache_features and self.keeps_hma("connector.offloading"):
            self.tier_kinds = ["p2p"]
            if "nvme" in tiers:
                self.tier_kinds = ["fs", "p2p"]
            self.ask(
                "Must instances on different machines share one cache?",
                "yes: native TieringOffloadingSpec with a p2p tier",
                decided=True,
            )
            self.reject("lmcache_p2p", "needs a controller pod and the in-process LMCache connector")
            return "native_tiering"
        if self.needs_hma:
            self.reject("lmcache_p2p", "LMCache P2P runs on LMCacheConnectorV1, which cannot serve hybrid models")
            self.ask(
                "Must instances on different machines share one cache (hybrid/sliding model)?",
                "no peer-sharing path keeps HMA here: each instance keeps its own cache",
                decided=True,
            )
            self.notes.append(
                f"Native peer sharing arrives with the p2p tier in {self.gated('feature.tier-p2p').introduced}."
            )
            return self._cpu_only()
        self.ask(
            "Must instances on different machines share one cache?",
            "yes: LMCache P2P with its controller",
            decided=True,
        )
        if has_p2p:
            self.reject("native_tiering", "the LMCache controller was asked for")
        return "lmcache_p2p"

    def _shared_on_one_node(self) -> Backend:
        """Several instances on one machine share a cache (or cache work must leave the engine process)."""
        c = self.request.constraints
        if c.no_extra_pods and not c.isolate_cache_from_engine:
            fs_ok = (
                self.has(
                    "feature.tier-fs",
                    effect_if_missing="no native filesystem tier: sharing on one node needs the LMCache server",
                    effect_if_present="instances can share one native fs tier directory",
                )
                and self.recipes.tier_type("fs", self.version) is not None
            )
            if fs_ok and self.keeps_hma("connector.offloading"):
                self.tier_kinds = ["fs"]
                self.ask(
                    "Instances on one node share a cache, with no extra pods?",
                    "native fs tier on a directory all instances mount",
                    decided=True,
                )
                self.reject("lmcache_mp", "needs an LMCache server beside vLLM, which the constraints rule out")
                return "native_tiering"
        has_mp = self.has(
            "connector.lmcache-mp",
            effect_if_missing="LMCacheMPConnector is not in this release",
            effect_if_present="LMCacheMPConnector connects vLLM to a shared LMCache server",
        )
        if has_mp and self.keeps_hma("connector.lmcache-mp"):
            self.ask(
                "Instances on one node share a cache, or cache work must leave the vLLM process?",
                "yes: LMCache MP (one LMCache server per node)",
                decided=True,
            )
            self.reject("lmcache", "the in-process connector gives each worker its own private cache")
            if c.no_extra_pods:
                self.notes.append("LMCache MP needs its server process; run it as a sidecar if pods are limited.")
            return "lmcache_mp"
        self.ask(
            "Instances on one node share a cache?",
            "no path shares a cache for this model in this release: each instance keeps its own",
            decided=True,
        )
        self.reject("lmcache_mp", "LMCacheMPConnector cannot keep HMA for this model in this release")
        return self._cpu_only()

    def _disaggregated(self, tiers: set[Tier]) -> Backend:
        r = self.request
        multi_node_rdma = r.fabric in ("infiniband", "roce") and r.topology.nodes > 1
        local_tier = bool(tiers & {"cpu"})
        nixl_hma = self.keeps_hma("connector.nixl")
        if local_tier:
            offload_hma = self.keeps_hma("connector.offloading")
            multi_hma = self.keeps_hma("connector.multi")
            if not self.needs_hma or (offload_hma and multi_hma and nixl_hma):
                self.ask(
                    "Prefill/decode disaggregation with a local CPU tier on each instance?",
                    "yes: MultiConnector of NixlConnector and OffloadingConnector",
                    decided=True,
                )
                self.reject("nixl_pd", "gives no CPU overflow tier on the instances")
                return "multi_nixl_offload"
            self.reject(
                "multi_nixl_offload",
                f"one child without HMA support turns HMA off for the whole MultiConnector in {self.version}",
            )
            self.notes.append("The local CPU tier is dropped: with this model it would cost HMA in this release.")
        if multi_node_rdma:
            has_mooncake = self.has(
                "connector.mooncake",
                effect_if_missing="MooncakeConnector is not in this release: NIXL carries the P/D transfer",
                effect_if_present="MooncakeConnector is available for RDMA P/D transfer",
            )
            if has_mooncake and (self.keeps_hma("connector.mooncake") or not nixl_hma):
                self.ask(
                    "Prefill/decode disaggregation across nodes on an RDMA fabric?",
                    "yes: MooncakeConnector",
                    decided=True,
                )
                self.reject(
                    "nixl_pd",
                    "also works over RDMA (UCX rc transports); MooncakeConnector is preferred on a dedicated RDMA "
                    "fabric because its Transfer Engine moves KV over RDMA by default (mooncake_protocol rdma)",
                )
                return "mooncake_pd"
        self.ask("Prefill/decode disaggregation?", "yes: NixlConnector 1P1D with a proxy", decided=True)
        if not multi_node_rdma:
            self.reject("mooncake_pd", "its strength is a dedicated RDMA fabric between nodes, which was not given")
        if self.needs_hma and not nixl_hma:
            self.notes.append(
                f"NixlConnector supports HMA from {self.hma_boundary('connector.nixl')}; this model loses its "
                "hybrid memory layout (or fails to start) on this release."
            )
        return "nixl_pd"


# ---------------------------------------------------------------------------------------------


_REQUIRED_ENV_WHY = "LMCache asserts it (or P2P never hits) with P2P on"
_KIND_ORDER: tuple[RequirementKind, ...] = ("flag", "env", "process", "service", "port", "package")


def _requirements(ch: _Chooser, recipe: Recipe) -> list[Requirement]:
    """Flags, environment, packages and processes the recommended backend needs in this release."""
    backend = recipe.backend
    req = _native_cpu_flags(ch) if backend == "native_cpu" else []
    if recipe.connector is not None and backend != "native_cpu":
        req.append(
            Requirement(
                kind="flag",
                name="--kv-transfer-config",
                value=f"JSON naming {ch.gated(recipe.connector).name}",
                why="selects and configures the connector",
                source="flag.kv-transfer-config",
            )
        )
    req += _recipe_requirements(ch, recipe)
    if backend == "native_tiering":
        req += _tiering_requirements(ch)
    req += _pd_requirements(ch, recipe)
    req += _port_requirements(ch, recipe)
    req += _package_requirements(ch, recipe, req)
    return sorted(req, key=lambda q: _KIND_ORDER.index(q.kind))  # stable: each kind keeps its order


def _port_requirements(ch: _Chooser, recipe: Recipe) -> list[Requirement]:
    """The ports the backend's connectors bind in this release (knowledge/ports.yaml), to open between nodes."""
    found = []
    for connector_id in dict.fromkeys(c for c in (recipe.connector, recipe.pd_connector) if c is not None):
        name = ch.gated(connector_id).name
        for layout in ports.layouts_at(ch.k, name, ch.version):
            step = {"tp": " + DP rank × TP", "1": " + DP index", "0": ""}[layout.dp_stride]
            step += " + TP rank" if layout.tp_stride else ""
            setting = layout.base_env or f"kv_connector_extra_config.{layout.base_extra_config}"
            found.append(
                Requirement(
                    kind="port",
                    name=f"{name}: {layout.what}",
                    value=f"{setting} (default {layout.base_default}){step}",
                    why=f"bound by {layout.listener}" + (f", unless {layout.unless}" if layout.unless else ""),
                    source=layout.id,
                )
            )
    return found


def _native_cpu_flags(ch: _Chooser) -> list[Requirement]:
    """The shorthand flags where they start native CPU offload in this release, else the explicit config."""
    broken = ch.k.by_id["pitfall.native-backend-before-0.14"]
    assert isinstance(broken, Pitfall)
    broken_range = parse_specifier(broken.versions)
    if ch.has("flag.kv-offloading-size") and not contains(broken_range, ch.version):
        return _shorthand_flags(ch)
    shorthand = ch.gated("feature.kv-offloading-cli-shorthand")
    ch.gates[shorthand.id] = VersionGate(
        id=shorthand.id,
        name=shorthand.name,
        first_release=next((s.version for s in broken_range if s.operator == "<"), None),
        present=False,
        effect="the --kv-offloading-size shorthand cannot start native offload here: configure OffloadingConnector "
        "with --kv-transfer-config and num_cpu_blocks",
    )
    ch.cite(shorthand.id)
    return [
        Requirement(
            kind="flag",
            name="--kv-transfer-config",
            value='{"kv_connector":"OffloadingConnector","kv_role":"kv_both","kv_connector_extra_config":{"num_cpu_blocks":N}}',
            why="explicit config; the shorthand does not work before its fix",
            source="spec.num-cpu-blocks",
        )
    ]


def _shorthand_flags(ch: _Chooser) -> list[Requirement]:
    flags = [
        Requirement(
            kind="flag",
            name="--kv-offloading-size",
            value="<GiB, total across ranks>",
            why="turns on native CPU offload; total for the instance, not per GPU",
            source="flag.kv-offloading-size",
        ),
        Requirement(
            kind="flag",
            name="--kv-offloading-backend",
            value="native",
            why="selects OffloadingConnector",
            source="flag.kv-offloading-backend",
        ),
    ]
    pitfall = ch.k.by_id["pitfall.hma-flag-missing-with-shorthand"]
    assert isinstance(pitfall, Pitfall)
    if in_range(pitfall.versions, ch.version) and ch.hma("connector.offloading") == "no":
        flags.append(
            Requirement(kind="flag", name="--disable-hybrid-kv-cache-manager", why=pitfall.why, source=pitfall.id)
        )
    return flags


def _recipe_requirements(ch: _Chooser, recipe: Recipe) -> list[Requirement]:
    """What the recipe states for every release: the environment LMCache asserts, then the requirements
    that apply to what was asked (an NVMe tier, GPUDirect Storage)."""
    req = [
        Requirement(kind="env", name=e.name, value=e.value, why=_REQUIRED_ENV_WHY, source=e.setting)
        for e in recipe.required_env
    ]
    asked = {"nvme-tier": "nvme" in ch.request.tiers, "gpudirect-storage": ch.request.constraints.gpudirect_storage}
    return req + [
        Requirement(kind=r.kind, name=r.name, value=r.value, why=r.why, source=r.source)
        for r in recipe.requirements
        if r.when is None or asked[r.when]
    ]


def _tiering_requirements(ch: _Chooser) -> list[Requirement]:
    """The hash seed, p2p addressing and NIXL the chosen secondary tiers need in this release."""
    req = _hash_seed_requirements(ch)
    if "p2p" in ch.tier_kinds:
        req += _p2p_tier_requirements(ch)
    if {"obj", "p2p"} & set(ch.tier_kinds):
        req.append(
            Requirement(
                kind="package",
                name="nixl",
                why="the obj and p2p tiers move blocks through NIXL",
                source=ch.recipes.tier_names_entry("obj" if "obj" in ch.tier_kinds else "p2p").feature,
            )
        )
    return req


def _hash_seed_requirements(ch: _Chooser) -> list[Requirement]:
    seed = ch.k.by_id["env.pythonhashseed"]
    if "p2p" in ch.tier_kinds and ch.has(
        "feature.p2p-pythonhashseed-check",
        effect_if_present="the p2p tier refuses to start without PYTHONHASHSEED in this release",
    ):
        return [
            Requirement(
                kind="env",
                name="PYTHONHASHSEED",
                value="0",
                why="the p2p tier raises at start-up when it is unset in this release",
                source=seed.id if isinstance(seed, Setting) else None,
            )
        ]
    if ("p2p" in ch.tier_kinds or ch.request.topology.share_cache_across_instances) and not ch.has(
        "feature.prefix-hash-fixed-default-seed",
        effect_if_missing="block hashes are seeded per process: instances sharing a tier need one PYTHONHASHSEED",
    ):
        return [
            Requirement(
                kind="env",
                name="PYTHONHASHSEED",
                value="0",
                why="same value on every instance that shares the tier, or they never hit each other's blocks",
                source="pitfall.shared-tier-without-hash-seed",
            )
        ]
    return []


def _p2p_tier_requirements(ch: _Chooser) -> list[Requirement]:
    """A routable address for the p2p tier: the environment where vLLM reads one, else the tier entry."""
    if ch.has("env.vllm-p2p-side-channel-host"):
        address = Requirement(
            kind="env",
            name="VLLM_P2P_SIDE_CHANNEL_HOST",
            value="<this instance's routable IP>",
            why="the default is localhost, which keeps the tier on one machine",
            source="env.vllm-p2p-side-channel-host",
        )
    else:
        address = Requirement(
            kind="flag",
            name="secondary_tiers[type=p2p].host",
            value="<this instance's routable IP>",
            why="advertised verbatim to peers; 0.0.0.0 is not reachable",
            source="spec.tier.p2p.host",
        )
    service = Requirement(
        kind="service",
        name="headless Service with publishNotReadyAddresses",
        why="peers dial each pod by its own address",
        source="spec.tier.p2p.host",
    )
    return [address, service]


def _pd_requirements(ch: _Chooser, recipe: Recipe) -> list[Requirement]:
    """The proxy a disaggregated backend needs in this release, and UCX's transports for NIXL."""
    req = []
    proxy = ch.recipes.pd_proxy(recipe.pd_connector, ch.version) if recipe.pd_connector else None
    if proxy is not None:
        req.append(
            Requirement(
                kind="process",
                name=f"P/D proxy ({proxy.script})",
                value=proxy.path,
                why=f"sends each request to prefill, then decode; from the vLLM source tree at v{ch.version} (not in "
                "the wheel or image)",
                source=proxy.id,
            )
        )
        ch.cited.setdefault(proxy.id, cite(proxy.id, proxy, ch.k))
    if recipe.backend in ("nixl_pd", "multi_nixl_offload"):
        req.append(
            Requirement(
                kind="env",
                name="UCX_TLS",
                value=ch.recipes.facts.ucx_tls_by_fabric.transports(ch.request.fabric or "ethernet"),
                why="UCX must see a CUDA transport or the transfer thread crashes",
                source="pitfall.nixl-ucx-without-cuda",
            )
        )
    return req


def _package_requirements(ch: _Chooser, recipe: Recipe, required: list[Requirement]) -> list[Requirement]:
    """The packages the recipe imports, and the version pins its connectors need in this release."""
    k = ch.k
    req = [
        Requirement(kind="package", name=pkg, why=f"{recipe.title} imports it", source=recipe.connector)
        for pkg in recipe.packages
    ]
    connector = k.by_id.get(recipe.connector or "")
    pin_ids = set(connector.related) if isinstance(connector, Gated) else set()
    if recipe.backend in ("multi_nixl_offload", "lmcache_p2p"):
        pin_ids |= set(ch.gated("connector.nixl").related)
    for pin in k.pins:
        if pin.id in pin_ids and in_range(pin.vllm_versions, ch.version):
            req.append(Requirement(kind="package", name=pin.requirement, why=pin.note or "", source=pin.id))
            ch.cite(pin.id)
    if recipe.backend == "lmcache_mp" and ch.needs_hma:
        hma_pin = k.by_id.get("pin.lmcache-mp-hma")
        if isinstance(hma_pin, CompatPin) and not any(q.source == hma_pin.id for q in [*required, *req]):
            req.append(Requirement(kind="package", name=hma_pin.requirement, why=hma_pin.note or "", source=hma_pin.id))
    return req


# The pitfalls to avoid -------------------------------------------------------------------------
#
# A recipe lists the review rules that concern its backend; each is tested against what was
# chosen. The choice settles the connectors, whether the offload shorthand is in effect, the
# spec, the secondary tiers, the model, the release and the parallelism; every other condition
# (a flag, a variable, host RAM, the GPU) is the operator's to write, so it stays open and is
# reported as what would make the rule hold.

_HMA_FLAG_WITH_HMA_CONNECTOR = "pitfall.hma-flag-with-hma-connector"
_OPERAND_LABELS = {
    "host:ram_gib": "host RAM GiB",
    "host:gpu_hbm_gib": "GPU memory GiB",
    "fact:host_offload_gib": "host offload GiB (all tiers in host memory)",
    "fact:world_size": "ranks per instance",
    "workload:p99_context_tokens": "p99 context tokens",
}
_NEGATED_OP = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}
_COMPARE: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
}


@dataclass(frozen=True)
class _Setup:
    """One way to configure the chosen backend: as recommended, or through the offload shorthand,
    which can configure another connector (``premise`` says how; empty for the recommendation)."""

    connectors: tuple[Connector, ...]
    shorthand: bool
    spec: str | None
    tiers: frozenset[str]
    premise: str = ""


Judged = tuple[bool | None, str]  # true, false or open; for open, the conditions that would make it true


class _Judge:
    """Three-valued evaluation of a rule's condition (knowledge `Condition`) against one setup."""

    def __init__(self, ch: _Chooser, setup: _Setup, required: set[str]) -> None:
        self.ch = ch
        self.setup = setup
        self.required = required  # the flags and variables the requirements list
        self.listed: set[str] = set()  # those among them that an open condition names

    def judge(self, c: Condition, negate: bool = False) -> Judged:
        if c.not_ is not None:
            return self.judge(c.not_, not negate)
        parts = c.all_ if c.all_ is not None else c.any_
        if parts is not None:
            return _combine([self.judge(p, negate) for p in parts], conjunction=(c.all_ is not None) != negate)
        known = self._known(c)
        if known is not None:
            return known != negate, ""
        return None, self._open(c, negate)

    def _known(self, c: Condition) -> bool | None:
        """The value of a condition the choice settles; None for one the configuration decides."""
        ch, s = self.ch, self.setup
        if c.connector is not None:
            return any(x.name in c.connector for x in s.connectors)
        if c.connector_hma is not None:
            return any(x.hma_at(ch.version) == c.connector_hma for x in s.connectors)
        if c.connector_configured is not None:
            return bool(s.connectors) is c.connector_configured
        if c.connector_unavailable is not None:
            skipped = c.connector_unavailable
            return any(x.name not in skipped and not x.exists_in(ch.version) for x in s.connectors)
        if c.offload_shorthand is not None:
            return s.shorthand is c.offload_shorthand
        if c.tier is not None:
            return bool(s.tiers & set(c.tier))
        if c.tier_unregistered is not None:
            return not c.tier_unregistered  # the chosen tiers are the release's registered types
        if c.entry_unavailable is not None:
            return ch.gated(c.entry_unavailable).status_at(ch.version) in ("removed", "not_yet")
        if c.entry_deprecated is not None:
            return ch.gated(c.entry_deprecated).status_at(ch.version) in ("deprecated", "removed")
        if c.model_matches is not None:
            return self._model_matches(c.model_matches)
        if c.extra_config is not None and c.extra_config.name == "spec_name" and s.spec is not None:
            return re.search(c.extra_config.matches, s.spec) is not None
        if c.compare is not None:
            left, right = self._side(c.compare.left), self._side(c.compare.right)
            if left is not None and right is not None:
                return _COMPARE[c.compare.op](left, right)
        return None

    def _model_matches(self, pattern: str) -> bool | None:
        model = self.ch.k.find_model(self.ch.model_id) if self.ch.model_id else None
        if model is None:
            return None
        return any(re.search(pattern, name) for name in (model.id, model.name, model.hf_repo, *model.aliases))

    def _operand(self, text: str) -> float | None:
        """An operand's value where the choice gives it: a number, or the ranks one instance spans."""
        if re.fullmatch(r"\d+(\.\d+)?", text):
            return float(text)
        if text == "fact:world_size":
            t = self.ch.request.topology
            return float(t.tensor_parallel_size * t.pipeline_parallel_size)
        return None

    def _side(self, expression: str) -> float | None:
        parts = re.split(r"\s+([*/])\s+", expression.strip())
        value = self._operand(parts[0])
        for op, operand in zip(parts[1::2], parts[2::2], strict=True):
            other = self._operand(operand)
            if value is None or other is None or (op == "/" and not other):
                return None
            value = value * other if op == "*" else value / other
        return value

    def _label(self, operand: str) -> str:
        known = self._operand(operand)
        kind, _, name = operand.partition(":")
        if kind in ("flag", "env"):
            return name
        label = _OPERAND_LABELS.get(operand, name.replace("_", " ").replace("gib", "GiB"))
        return f"{label} ({known:g})" if known is not None else label

    def _open(self, c: Condition, negate: bool) -> str:
        """The condition in words, as what must be true for the rule to hold."""
        test = c.flag_value or c.env_value
        named = c.flag or c.flag_on or c.env or (test.name if test else None)
        if named in self.required:
            self.listed.add(named)
        return self._words(c, negate)

    def _words(self, c: Condition, negate: bool) -> str:
        neg = " not" if negate else ""
        if c.flag is not None or c.flag_on is not None:
            return f"{c.flag or c.flag_on} is{neg} given"
        if c.flag_off is not None:
            return f"{c.flag_off} is{neg} turned off"
        if c.env is not None:
            return f"{c.env} is{neg} set"
        test = c.flag_value or c.env_value or c.extra_config
        if test is not None:
            name = f"kv_connector_extra_config.{test.name}" if c.extra_config else test.name
            return f"{name} is{neg} set to a value matching {test.matches}"
        if c.compare is not None:
            op = _NEGATED_OP[c.compare.op] if negate else c.compare.op
            return f"{self._expression(c.compare.left)} {op} {self._expression(c.compare.right)}"
        if c.model_matches is not None:
            return f"the model's name {'does not match' if negate else 'matches'} {c.model_matches}"
        if c.gpu_segment is not None:
            return f"the GPU is{neg} a {' or '.join(c.gpu_segment)} part"
        if c.gpu_capability_below is not None:
            return f"the GPU's compute capability is{neg} below {c.gpu_capability_below}"
        if c.env_differs is not None:
            return f"instances sharing the cache{' do not' if negate else ''} set {c.env_differs} differently"
        if c.pd_proxy_mismatch is not None:
            return f"the P/D proxy started is{'' if negate else ' not'} the one this connector needs in this release"
        return f"the configuration does{neg} give an option vLLM {self.ch.version} does not accept"

    def _expression(self, expression: str) -> str:
        return re.sub(r"(flag|env|fact|host|workload):[\w.-]+", lambda m: self._label(m.group(0)), expression)


def _combine(parts: list[Judged], conjunction: bool) -> Judged:
    """``all`` (conjunction) or ``any`` of three-valued parts; an open result names its open parts."""
    decisive = not conjunction  # false settles an all, true an any
    if any(value is decisive for value, _ in parts):
        return decisive, ""
    open_parts = [text for value, text in parts if value is None]
    if not open_parts:
        return conjunction, ""
    joined = (" and " if conjunction else " or ").join(open_parts)
    return None, f"({joined})" if len(open_parts) > 1 else joined


def _setups(ch: _Chooser, recipe: Recipe, requirements: list[Requirement]) -> list[_Setup]:
    """The recommended setup, then each other one the offload shorthand makes of this backend here."""
    connector_ids = [recipe.connector] if recipe.connector else []
    if recipe.backend == "multi_nixl_offload":
        connector_ids += ["connector.nixl", "connector.offloading"]
    connectors = tuple(c for c in (ch.k.by_id[i] for i in connector_ids) if isinstance(c, Connector))
    uses_shorthand = any(q.name == "--kv-offloading-backend" for q in requirements)
    tiers = frozenset([*ch.tier_kinds, *(ch.recipes.tier_type(kind, ch.version) or kind for kind in ch.tier_kinds)])
    setups = [_Setup(connectors, uses_shorthand, recipe.spec, tiers)]
    if ch.tier_kinds:
        return setups  # the shorthand configures a CPU tier only: it is no way to set up secondary tiers
    # The shorthand backends that can configure this recipe's connector, in any release.
    backends = {s.backend for s in ch.k.offload_shorthand if s.connector == recipe.connector}
    for s in ch.k.offload_shorthand:
        if s.backend not in backends or not in_range(s.versions, ch.version):
            continue
        if uses_shorthand and s.when_env is None:
            continue  # that is the recommendation itself
        connector = ch.k.by_id[s.connector]
        assert isinstance(connector, Connector)
        premise = f"--kv-offloading-backend {s.backend} is used" + (
            f" with {s.when_env.name} set to a value matching {s.when_env.matches} (it then configures "
            f"{connector.name})"
            if s.when_env
            else f" instead (it configures {connector.name} in {ch.version})"
        )
        setups.append(_Setup((connector,), True, None, frozenset(), premise))
    return setups


def _avoid(ch: _Chooser, recipe: Recipe, requirements: list[Requirement]) -> list[AvoidNote]:
    """The recipe's pitfalls whose conditions the chosen setup meets, or may meet (a check)."""
    candidates = [*recipe.avoid]
    if ch.needs_hma and _HMA_FLAG_WITH_HMA_CONNECTOR not in candidates:
        candidates.append(_HMA_FLAG_WITH_HMA_CONNECTOR)
    required = {q.name for q in requirements}
    setups = _setups(ch, recipe, requirements)
    notes = []
    for pid in candidates:
        rule = ch.k.by_id[pid]
        assert isinstance(rule, Pitfall)
        if not in_range(rule.versions, ch.version):
            continue
        note = _avoid_note(ch, rule, setups, required)
        if note is not None:
            notes.append(note)
            ch.cite(rule.id)
    return notes


def _avoid_note(ch: _Chooser, rule: Pitfall, setups: list[_Setup], required: set[str]) -> AvoidNote | None:
    """The note for ``rule`` from the first setup that does not rule it out; None when every one does."""
    holds: bool | None = None
    check = "it has no condition to test against the choice: compare its title with your configuration"
    if rule.when is not None:
        for setup in setups:
            judge = _Judge(ch, setup, required)
            holds, open_part = judge.judge(rule.when)
            if holds is False:
                continue
            holds = holds and not setup.premise
            listed = f"; the requirements list {', '.join(sorted(judge.listed))}" if judge.listed else ""
            check = "holds when " + " and ".join(part for part in (setup.premise, open_part) if part) + listed
            break
        else:
            return None
    capped: Severity = "info" if rule.severity == "info" else "warning"
    return AvoidNote(
        id=rule.id,
        title=rule.title,
        severity=rule.severity if holds else capped,
        rule_severity=rule.severity,
        holds="yes" if holds else "check",
        check=None if holds else check,
        fix=rule.fix,
        why=rule.why,
        premises=list(rule.premises),
        sources=list(rule.sources),
    )


def _bugs(ch: _Chooser, ids: set[str]) -> list[BugNote]:
    found = []
    for bug in ch.k.bugs:
        if not ids & set(bug.related):
            continue
        # Bugs tied to the hybrid KV cache manager only bite models that need it.
        if "flag.disable-hybrid-kv-cache-manager" in bug.related and not ch.needs_hma:
            continue
        affected = bug.affected_versions.get("vllm")
        if affected is not None and not in_range(affected, ch.version):
            continue
        if bug.snapshot.state == "open":
            status: Literal["open", "closed_without_fix", "fixed_in_later_release"] = "open"
        elif bug.fixed_in is not None and bug.fixed_in.package == "vllm" and bug.fixed_in.version > ch.version:
            status = "fixed_in_later_release"
        elif bug.fixed_in is None and bug.snapshot.state_reason != "completed":
            status = "closed_without_fix"
        else:
            continue
        found.append(_bug_note(bug, status))
        ch.cite(bug.id)
    return found


def _bug_note(bug: Bug, status: Literal["open", "closed_without_fix", "fixed_in_later_release"]) -> BugNote:
    return BugNote(
        id=bug.id,
        title=bug.title,
        status=status,
        state=bug.snapshot.state,
        state_reason=bug.snapshot.state_reason,
        checked_at=str(bug.snapshot.checked_at),
        fixed_in=f"{bug.fixed_in.package} {bug.fixed_in.version}" if bug.fixed_in else None,
        avoidance=bug.avoidance,
    )


def choose_backend(request: ChooseBackendRequest, knowledge: Knowledge) -> ChooseBackendResult:
    recipes = knowledge.recipes
    ch = _Chooser(request, knowledge, recipes)
    lm_context = lm_version = None
    if request.lmcache_version:
        lm_version, lm_context = resolve_version(
            knowledge, request.lmcache_version, package="lmcache", field="lmcache_version"
        )
    backend = ch.decide()
    recipe = recipes.recipe(backend)
    tiers: list[str] = []
    if backend not in ("none", "nixl_pd", "mooncake_pd", "lmcache_mp"):
        tiers.append("cpu")
    if backend == "native_tiering":
        tiers += [recipes.tier_type(kind, ch.version) or kind for kind in ch.tier_kinds]
    elif backend == "lmcache" and "nvme" in request.tiers:
        tiers.append("disk" if not request.constraints.gpudirect_storage else "gds")
    elif backend == "lmcache" and request.constraints.gpudirect_storage:
        tiers.append("gds")
    elif backend == "lmcache_mp":
        tiers.append("lmcache-server DRAM")
    connector = knowledge.by_id[recipe.connector].name if recipe.connector else None  # type: ignore[union-attr]
    if recipe.connector:
        ch.cite(recipe.connector)
    for gate in recipe.gates:
        ch.cite(gate)
    requirements = _requirements(ch, recipe)
    avoid = _avoid(ch, recipe, requirements)
    path_ids = {recipe.connector or "", *recipe.gates, *(q.source or "" for q in requirements), *ch.gates}
    if backend == "multi_nixl_offload":
        path_ids |= {"connector.nixl", "connector.offloading"}
    bugs = _bugs(ch, path_ids - {""})
    facts = backend_facts(knowledge, backend)
    security = security_check(knowledge, "vllm", ch.version, facts)
    ch.gates["security.floor"] = _floor_gate(security)
    lm_security = None
    if lm_version is not None and backend in ("lmcache", "lmcache_p2p", "lmcache_mp"):
        lm_security = security_check(knowledge, "lmcache", lm_version, facts)
        ch.gates["security.lmcache-floor"] = _floor_gate(lm_security)
    citations = [*ch.cited.values()]
    for cid in (recipe.id,):
        citations.append(
            Citation(id=cid, sources=list(recipe.sources), verified_at=recipe.verified_at, evidence=recipe.evidence)
        )
    return ChooseBackendResult(
        version_context=ch.context,
        lmcache_context=lm_context,
        model=ch.model_id,
        traits=ch.traits,
        recommendation=Recommendation(
            backend=backend,
            title=recipe.title,
            connector=connector,
            spec=recipe.spec,
            tiers=tiers,
            roles=list(recipe.roles),
            summary=recipe.summary,
        ),
        decision_path=ch.path,
        alternatives=ch.alternatives,
        requirements=requirements,
        avoid=avoid,
        version_gates=list(ch.gates.values()),
        bugs=bugs,
        notes=ch.notes,
        citations=citations,
        security=security.for_detail("summary"),
        lmcache_security=lm_security.for_detail("summary") if lm_security is not None else None,
    )


def _floor_gate(check: SecurityCheck) -> VersionGate:
    """The security floor as a version gate: the lowest release clear of every critical and high advisory."""
    label = "LMCache" if check.package == "lmcache" else "vLLM"
    serious = check.serious_ids()
    if check.security_floor is not None:
        effect = f"lowest {label} release clear of every critical and high advisory for this backend"
    elif check.floor_status == "none_clear":
        effect = f"no known {label} release is clear of every critical and high advisory for this backend"
    else:
        effect = "no critical or high advisory applies to this backend"
    if serious:
        effect += f"; {check.version} is affected by {first_few(serious)}"
    return VersionGate(
        id=f"security.{'lmcache-' if check.package == 'lmcache' else ''}floor",
        name=f"{label} security floor",
        first_release=check.security_floor,
        present=not check.below_floor and not (check.floor_status == "none_clear" and bool(serious)),
        effect=f"{effect} ({check.source})",
    )


SPEC = ToolSpec(
    name="choose_backend",
    title="Choose a vLLM KV caching backend",
    description=(
        "Picks the KV caching backend for a release, topology, wanted tiers and model, with flags, pitfalls, version "
        "gates and open bugs. Feed the result to render_config."
    ),
    request=ChooseBackendRequest,
    result=ChooseBackendResult,
    run=choose_backend,
)

__all__ = ["SPEC", "ChooseBackendRequest", "ChooseBackendResult", "Feature", "choose_backend"]
