"""MCP prompts: the three flows operators start most often, as ready-made instructions for the agent.

A prompt does not answer anything itself; it tells the agent which tools to call, in which order,
with which arguments, and how to report. The arguments of each tool call are built here from the
prompt's typed arguments and checked against that tool's request model, so a prompt can never
hand the agent a call the tool would reject. Over MCP, prompt arguments arrive as strings; the SDK
converts them to the types declared below and rejects what does not fit.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.prompts.base import Message, Prompt, UserMessage
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, InputRequiredResult
from pydantic import Field, ValidationError

from .safe_text import one_line
from .tools import describe_validation_error, tool_spec

_ISSUE = re.compile(r"^[\w.-]+/[\w.-]+#\d+$|^https://github\.com/[\w.-]+/[\w.-]+/(issues|pull)/\d+/?$")


class PromptArgumentError(ValueError):
    """A prompt argument the types could not catch; the message names it and what it accepts."""


class _Prompt(Prompt):
    """A prompt whose bad arguments come back as invalid-params errors naming the argument.

    The SDK turns every failure while rendering into an opaque internal error; an operator who typed
    "eight" for a tensor-parallel size should be told which argument was wrong instead.
    """

    async def render(self, arguments: dict[str, Any] | None, context: Any) -> list[Message] | InputRequiredResult:
        missing = sorted({a.name for a in self.arguments or [] if a.required} - set(arguments or {}))
        if missing:
            raise MCPError(INVALID_PARAMS, f"{', '.join(missing)}: required by the prompt {self.name}")
        try:
            return await super().render(arguments, context)
        except ValueError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError):
                raise MCPError(INVALID_PARAMS, describe_validation_error(cause)) from None
            if isinstance(cause, PromptArgumentError):
                raise MCPError(INVALID_PARAMS, str(cause)) from None
            raise


Version = Annotated[str | None, Field(max_length=40, description="vLLM release in use, e.g. '0.22.1'; ask if unknown")]


def _fenced(text: str, info: str = "") -> str:
    """``text`` in a Markdown code fence longer than any run of backticks inside it, so nothing in the
    text (a ``` in a pasted file) can close the fence and be read as instructions outside it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text}\n{fence}"


def _call(tool: str, arguments: dict[str, Any]) -> str:
    """One tool call as the agent should make it; validated against the tool's request model first."""
    tool_spec(tool).request.model_validate(arguments)
    return f"`{tool}` with arguments:\n{_fenced(json.dumps(arguments, indent=2), 'json')}"


def _version_line(version: str | None) -> str:
    if version:
        return f"The user runs vLLM {version}; pass it to every tool."
    return (
        "The vLLM version is not known yet. Ask the user for it (or read it from the image tag) before "
        "giving any flag advice; until then the tools answer for the newest release they know and say so."
    )


def review_this_deployment(
    deployment: Annotated[
        str, Field(min_length=1, description="The deployment text: vllm serve line, compose file, manifest or values")
    ],
    file_name: Annotated[
        str, Field(max_length=200, description="File name (its suffix picks the parser)")
    ] = "deployment.yaml",
    version: Version = None,
    host_ram_gib: Annotated[float | None, Field(gt=0, description="RAM installed per node, GiB")] = None,
    gpu: Annotated[str | None, Field(max_length=100, description="GPU model, e.g. 'H200'")] = None,
) -> list[UserMessage]:
    """Review a vLLM deployment for KV-caching mistakes, then check the upstream bugs that apply to it."""
    host: dict[str, Any] = {}
    if host_ram_gib is not None:
        host["ram_gib"] = host_ram_gib
    if gpu:
        host["gpu"] = gpu
    review_args: dict[str, Any] = {"documents": [{"name": file_name, "text": deployment}]}
    if version:
        review_args["version"] = version
    if host:
        review_args["host"] = host
    bug_args: dict[str, Any] = {"version": version} if version else {}
    text = f"""Review this vLLM deployment for KV-caching mistakes.

{_version_line(version)}

1. Call {_call("review_deployment", review_args)}
   The release comes from the image tag when there is one; the result's `version_context` says which it used.
2. For every finding of severity `error`, then `warning`: give the rule id, the file and line (or YAML path),
   the evidence, and the fix as the tool states it. Do not invent fixes the tool did not give.
3. If a finding names a flag whose meaning is unclear for this release, call `check_version` with that flag
   and the release.
4. Call {_call("check_bug_status", bug_args)}
   and list only the issues whose verdict is `still_affects_you` or `closed_without_fix` for this deployment's
   connector, with their avoidance.
5. End with the corrected command or manifest, changing only what the findings require.

The deployment ({one_line(file_name)}):
{_fenced(deployment)}"""
    return [UserMessage(text)]


def size_and_configure_offload(
    model: Annotated[
        str, Field(min_length=1, max_length=200, description="Model id or Hugging Face repo, e.g. 'llama-3.1-70b'")
    ],
    gpu: Annotated[str, Field(max_length=100, description="GPU id or name, e.g. 'gpu.h200-sxm' or 'H200'")],
    tensor_parallel_size: Annotated[int, Field(ge=1, le=64, description="GPUs per engine (TP)")],
    host_ram_gib: Annotated[float, Field(gt=0, description="RAM installed per node, GiB")],
    version: Version = None,
    typical_context_tokens: Annotated[
        int, Field(ge=1, description="tokens in a typical returning conversation")
    ] = 32768,
    warm_sessions: Annotated[int | None, Field(ge=0, description="idle sessions the CPU tier should keep warm")] = None,
    output_format: Annotated[
        Literal["vllm_serve", "docker_run", "kubernetes"],
        Field(description="what to render: vllm_serve, docker_run or kubernetes"),
    ] = "vllm_serve",
) -> list[UserMessage]:
    """Choose a KV offload backend for a cluster, size its tiers, render the config and review it."""
    version_args: dict[str, Any] = {"version": version} if version else {}
    choose_args: dict[str, Any] = {
        **version_args,
        "model": model,
        "tiers": ["cpu"],
        "topology": {"gpus_per_node": max(8, tensor_parallel_size), "tensor_parallel_size": tensor_parallel_size},
    }
    size_args: dict[str, Any] = {
        **version_args,
        "model": model,
        "gpu": gpu,
        "tensor_parallel_size": tensor_parallel_size,
        "host_ram_gib": host_ram_gib,
        "typical_context_tokens": typical_context_tokens,
    }
    if warm_sessions is not None:
        size_args["warm_sessions"] = warm_sessions
    text = f"""Size and configure KV offload for this cluster: {model} on {gpu}, TP {tensor_parallel_size}, \
{host_ram_gib:g} GiB of host RAM per node.

{_version_line(version)}

1. Call {_call("choose_backend", choose_args)}
   Keep its `recommendation.backend`, its `requirements` and its `avoid` list. If the user also wants NVMe,
   an object store, peer sharing or prefill/decode disaggregation, repeat the call with those `tiers` /
   `pd_disaggregation` before going on.
2. Call {_call("size_offload", size_args)}
   Report bytes per token (per rank and total), the GPU KV budget, live sessions, the CPU tier value in the
   unit the backend wants (`--kv-offloading-size` is GiB for the whole engine, not per GPU;
   `LMCACHE_MAX_LOCAL_CPU_SIZE` is GiB per rank), the host RAM left, and the load-time estimates next to
   re-prefill. Say which figures are estimates.
3. Call `render_config` with `choice` = the whole choose_backend result, `size_offload` = the whole
   size_offload result, `parallelism` = {{"tensor_parallel_size": {tensor_parallel_size}}}, `model` = "{model}",
   `format` = "{output_format}" and the same version.
4. Call `review_deployment` on the rendered file(s) with `host` = {{"ram_gib": {host_ram_gib:g}}} and the GPU.
   Any error finding means the config must change before it is used.
5. Call `check_bug_status` with the same version and mention open issues on the chosen path.

Give the final configuration once, with the sizing numbers it rests on and the version it is for."""
    return [UserMessage(text)]


def is_this_bug_still_a_problem(
    issue: Annotated[
        str,
        Field(
            min_length=3,
            max_length=300,
            description="The issue as 'owner/repo#N' (e.g. 'vllm-project/vllm#39702') or a GitHub issue URL",
        ),
    ],
    version: Version = None,
    lmcache_version: Annotated[
        str | None, Field(max_length=40, description="LMCache release, if LMCache is used")
    ] = None,
) -> list[UserMessage]:
    """Is an upstream vLLM / LMCache issue still a problem on the user's release, and what to do about it."""
    issue = issue.strip()
    if not _ISSUE.match(issue):
        raise PromptArgumentError(
            f"issue: {issue!r} is not an issue reference; give 'owner/repo#N' or https://github.com/OWNER/REPO/issues/N"
        )
    bug_args: dict[str, Any] = {"bugs": [issue]}
    if version:
        bug_args["version"] = version
    if lmcache_version:
        bug_args["lmcache_version"] = lmcache_version
    text = f"""Is {issue} still a problem for me?

{_version_line(version)}

1. Call {_call("check_bug_status", bug_args)}
2. Report the verdict in plain words: `fixed_in_your_version` (name the release that fixed it),
   `still_affects_you` (say why: open, or fixed only in a later release — name it), `closed_without_fix`
   (closed by a bot or as not planned, with no merged fix: a closed issue is not a fixed one),
   `not_affected`, or `unknown`. Say whether the state is live or from the stored snapshot, and its date.
3. If it still applies, give the avoidance the tool returned, and if a later release fixes it, call
   `check_version` with `version` = the user's release and `compare_to` = that release so the user sees
   what else changes in the upgrade.
4. If the user shares their deployment, call `review_deployment` on it to see whether it is on the
   affected path."""
    return [UserMessage(text)]


PROMPTS = (
    ("review_this_deployment", "Review this vLLM deployment", review_this_deployment),
    ("size_and_configure_offload", "Size and configure KV offload for this cluster", size_and_configure_offload),
    ("is_this_bug_still_a_problem", "Is this upstream bug still a problem for me?", is_this_bug_still_a_problem),
)


def add_prompts(server: MCPServer) -> None:
    """Register every prompt on ``server``."""
    for name, title, function in PROMPTS:
        server.add_prompt(_Prompt.from_function(function, name=name, title=title))
