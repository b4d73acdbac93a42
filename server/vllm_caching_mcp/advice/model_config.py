"""The architecture facts KV sizing needs, from the knowledge or from a local Hugging Face config.json.

`Architecture` is what `size_offload` computes with. It comes from one of three places: a
`ModelArch` entry in `knowledge/models.yaml` (sourced), a `config.json` on the user's disk
(read here, the way vLLM reads the same keys), or fields the user types in.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..knowledge import LinearAttentionState, ModelArch
from .common import AdviceError, ParamsB, TokenCount

DType = Literal["bfloat16", "float16", "float32"]
WeightsDType = Literal["bfloat16", "float16", "fp8", "mxfp4"]
MAX_CONFIG_BYTES = 4 * 2**20  # a config.json is tens of KiB; the bound is for the wrong file


class Architecture(BaseModel):
    """A decoder's attention layout: how many layers of each kind, and their KV geometry."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(default="custom model", max_length=200)
    num_layers: int = Field(gt=0, le=1000, description="num_hidden_layers")
    num_attention_heads: int = Field(gt=0, le=4096)
    num_kv_heads: int = Field(gt=0, le=4096, description="num_key_value_heads")
    head_dim: int = Field(gt=0, le=4096)
    attention: Literal["gqa", "mla"] = Field(default="gqa", description="gqa covers MHA/MQA")
    kv_lora_rank: int | None = Field(default=None, gt=0, le=65536)
    qk_rope_head_dim: int | None = Field(default=None, gt=0, le=4096)
    sliding_window: TokenCount | None = Field(default=None, gt=0)
    sliding_window_layers: int = Field(default=0, ge=0, le=1000)
    attention_chunk_size: TokenCount | None = Field(default=None, gt=0)
    chunked_local_layers: int = Field(default=0, ge=0, le=1000)
    linear_attention_layers: int = Field(default=0, ge=0, le=1000)
    linear_attention: LinearAttentionState | None = None
    params_total_b: ParamsB | None = Field(default=None, description="billions")
    params_active_b: ParamsB | None = Field(default=None, description="billions used per token")
    weights_dtype: WeightsDType = "bfloat16"
    default_dtype: DType = "bfloat16"
    max_position_embeddings: TokenCount | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _consistent(self) -> Architecture:
        special = self.sliding_window_layers + self.chunked_local_layers + self.linear_attention_layers
        if special > self.num_layers:
            raise ValueError("sliding_window_layers + chunked_local_layers + linear_attention_layers exceed num_layers")
        if self.attention == "mla" and (self.kv_lora_rank is None or self.qk_rope_head_dim is None):
            raise ValueError("attention 'mla' needs kv_lora_rank and qk_rope_head_dim")
        if self.sliding_window_layers and self.sliding_window is None:
            raise ValueError("sliding_window_layers needs sliding_window")
        if self.chunked_local_layers and self.attention_chunk_size is None:
            raise ValueError("chunked_local_layers needs attention_chunk_size")
        if self.linear_attention_layers and self.linear_attention is None:
            raise ValueError("linear_attention_layers needs linear_attention (the linear_* state sizes)")
        return self

    @property
    def full_attention_layers(self) -> int:
        return self.num_layers - self.sliding_window_layers - self.chunked_local_layers - self.linear_attention_layers

    @property
    def kv_head_size(self) -> int:
        """Width of one cached head: the MLA latent (kv_lora_rank + rope) or the head dim."""
        if self.attention == "mla":
            assert self.kv_lora_rank is not None and self.qk_rope_head_dim is not None
            return self.kv_lora_rank + self.qk_rope_head_dim
        return self.head_dim


def from_knowledge(entry: ModelArch) -> Architecture:
    fields = {name: getattr(entry, name) for name in Architecture.model_fields if name != "name"}
    return Architecture(name=entry.name, **fields)


def _text_config(raw: dict[str, Any]) -> dict[str, Any]:
    """Multimodal configs (Llama 4, Gemma 3, Mistral 3) keep the decoder under text_config."""
    text = raw.get("text_config")
    if isinstance(text, dict):
        merged = {k: v for k, v in raw.items() if k != "text_config"}
        merged.update(text)
        return merged
    return raw


def _positive_int(cfg: dict[str, Any], key: str) -> int | None:
    value = cfg.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        # The key and what it takes, not the value: that is the content of a file on the server's host.
        raise AdviceError("config_path", f"config.json field {key!r} must be a positive integer")
    return value


def _dtype(cfg: dict[str, Any]) -> DType:
    text = str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16").replace("torch.", "")
    aliases: dict[str, DType] = {
        "bfloat16": "bfloat16",
        "float16": "float16",
        "half": "float16",
        "float32": "float32",
        "float": "float32",
    }
    return aliases.get(text, "bfloat16")


def architecture_from_hf_config(raw: dict[str, Any], *, name: str) -> Architecture:
    """Read the keys vLLM reads from a Hugging Face config.json (decoder part only)."""
    cfg = _text_config(raw)
    layers = _positive_int(cfg, "num_hidden_layers")
    heads = _positive_int(cfg, "num_attention_heads")
    if layers is None or heads is None:
        raise AdviceError("config_path", "config.json has no num_hidden_layers / num_attention_heads")
    kv_heads = _positive_int(cfg, "num_key_value_heads") or heads
    head_dim = _positive_int(cfg, "head_dim")
    if head_dim is None:
        hidden = _positive_int(cfg, "hidden_size")
        if hidden is None:
            raise AdviceError("config_path", "config.json has neither head_dim nor hidden_size")
        head_dim = hidden // heads
    fields: dict[str, Any] = {
        "name": name,
        "num_layers": layers,
        "num_attention_heads": heads,
        "num_kv_heads": kv_heads,
        "head_dim": head_dim,
        "default_dtype": _dtype(cfg),
        "max_position_embeddings": _positive_int(cfg, "max_position_embeddings"),
    }
    if cfg.get("kv_lora_rank"):
        fields.update(
            attention="mla",
            kv_lora_rank=_positive_int(cfg, "kv_lora_rank"),
            qk_rope_head_dim=_positive_int(cfg, "qk_rope_head_dim"),
        )
    if isinstance(cfg.get("quantization_config"), dict):
        method = str(cfg["quantization_config"].get("quant_method", "")).lower()
        if method in ("fp8", "mxfp4"):
            fields["weights_dtype"] = method

    layer_types = cfg.get("layer_types")
    window = _positive_int(cfg, "sliding_window")
    if cfg.get("use_sliding_window") is False:
        window = None  # Qwen2/Qwen3 ship a window value but switch it off
    if isinstance(layer_types, list) and layer_types:
        if len(layer_types) != layers:
            raise AdviceError(
                "config_path", f"layer_types lists {len(layer_types)} layers, num_hidden_layers is {layers}"
            )
        sliding = sum(1 for t in layer_types if t in ("sliding_attention", "sliding_window"))
        linear = sum(1 for t in layer_types if t in ("linear_attention", "mamba"))
        chunked = sum(1 for t in layer_types if t in ("chunked_attention", "chunked_local_attention"))
    else:
        sliding = linear = chunked = 0
        pattern = _positive_int(cfg, "sliding_window_pattern")
        interval = _positive_int(cfg, "full_attention_interval")
        if interval is not None and cfg.get("linear_num_value_heads"):
            linear = layers - layers // interval  # Qwen3-Next: every interval-th layer is full attention
        elif window is not None and pattern is not None:
            sliding = layers - layers // pattern  # Gemma 3: every pattern-th layer is global
        elif window is not None:
            sliding = layers  # Mistral 7B style: every layer slides
    if sliding:
        if window is None:
            raise AdviceError("config_path", "config.json marks sliding layers but gives no sliding_window")
        fields.update(sliding_window=window, sliding_window_layers=sliding)
    chunk = _positive_int(cfg, "attention_chunk_size")
    if chunk is not None and not chunked:
        no_rope = cfg.get("no_rope_layers")
        if isinstance(no_rope, list) and len(no_rope) == layers:
            chunked = sum(1 for flag in no_rope if flag)  # 1 = RoPE layer = chunked local in vLLM's Llama 4
        else:
            interval = _positive_int(cfg, "no_rope_layer_interval") or 4
            chunked = layers - layers // interval
    if chunked:
        fields.update(attention_chunk_size=chunk, chunked_local_layers=chunked)
    if linear:
        state = {
            "conv_kernel_dim": _positive_int(cfg, "linear_conv_kernel_dim"),
            "num_key_heads": _positive_int(cfg, "linear_num_key_heads"),
            "num_value_heads": _positive_int(cfg, "linear_num_value_heads"),
            "key_head_dim": _positive_int(cfg, "linear_key_head_dim"),
            "value_head_dim": _positive_int(cfg, "linear_value_head_dim"),
        }
        missing = [k for k, v in state.items() if v is None]
        if missing:
            raise AdviceError("config_path", f"linear-attention layers need linear_* fields; missing {missing}")
        fields.update(linear_attention_layers=linear, linear_attention=state)
    try:
        return Architecture(**fields)
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_input=False)[0]
        raise AdviceError(
            "config_path", f"config.json does not describe a decoder vLLM can size: {first['msg']}"
        ) from None


class _ConfigPathPolicy:
    """Which config.json files a `config_path` may name: any (a local CLI or stdio server reads for the
    user who started it), or only those under one directory (a shared server), or none."""

    restricted = False
    root: Path | None = None


_policy = _ConfigPathPolicy()


def restrict_config_paths(root: Path | None) -> None:
    """From now on, read config.json files only under ``root`` (resolved), or none at all if None."""
    _policy.restricted = True
    _policy.root = root.resolve() if root is not None else None


def read_hf_config(path_text: str) -> Architecture:
    """Load a config.json (or a directory holding one) from the local disk."""
    path = _config_file(path_text)
    raw = _read_json_object(path, path_text)
    name = raw.get("_name_or_path")
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME_LENGTH:
        given = Path(path_text)
        name = (given.parent.name if given.name == "config.json" else given.name)[:MAX_NAME_LENGTH] or "local config"
    return architecture_from_hf_config(raw, name=name)


MAX_NAME_LENGTH = 200  # Architecture.name
_SHOWN_PATH_LENGTH = 120


def _shown(path_text: str) -> str:
    """The caller's path for a message: as given, shortened, and never spanning lines."""
    short = path_text if len(path_text) <= _SHOWN_PATH_LENGTH else path_text[:_SHOWN_PATH_LENGTH] + "..."
    return repr(short)


def _config_file(path_text: str) -> Path:
    """The file ``path_text`` names, decided by the access policy before any file system lookup.

    A server that reads no files looks nothing up; one restricted to a directory looks up nothing
    outside it and expands no '~' (the name of a home on the server's host means nothing to its
    callers). Every failure is an AdviceError, never an OSError or RuntimeError.
    """
    if _policy.restricted and _policy.root is None:
        raise AdviceError(
            "config_path",
            "this shared server reads no files; give the model's name in `model` or its layout in `architecture`",
        )
    if "\x00" in path_text:
        raise AdviceError("config_path", "a path cannot contain a NUL character")
    try:
        if _policy.root is not None:
            return _under_root(path_text, _policy.root)
        path = _expand_home(path_text)
        return path / "config.json" if path.is_dir() else path
    except OSError as exc:  # a name too long, a component that is not a directory, no permission
        raise AdviceError("config_path", f"cannot read {_shown(path_text)}: {_reason(exc)}") from None


def _expand_home(path_text: str) -> Path:
    try:
        return Path(path_text).expanduser()
    except RuntimeError:  # '~user' for a user this host does not have, or '~' with no home known
        user = path_text.split("/", 1)[0][1:]
        whose = f"user {user!r}" if user else "the user running this"
        raise AdviceError("config_path", f"{_shown(path_text)}: no home directory is known for {whose}") from None


def _under_root(path_text: str, root: Path) -> Path:
    """``path_text`` (relative to ``root``, or absolute) with symlinks and '..' resolved, if it stays under root."""
    resolved = _inside(root / path_text, path_text, root)
    if resolved.is_dir():
        resolved = _inside(resolved / "config.json", path_text, root)  # config.json may itself be a link
    return resolved


def _inside(path: Path, path_text: str, root: Path) -> Path:
    try:
        resolved = path.resolve()
    except (RuntimeError, OSError):  # a symlink loop (RuntimeError before Python 3.13)
        raise AdviceError("config_path", f"{_shown(path_text)} leads into a loop of symbolic links") from None
    if not resolved.is_relative_to(root):
        # The directory itself stays unnamed: it tells a caller about the server's host.
        raise AdviceError(
            "config_path", f"{_shown(path_text)} is outside the directory this server reads config files from"
        )
    return resolved


def _reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__  # not str(exc): that repeats the resolved path


def _read_json_object(path: Path, path_text: str) -> dict[str, Any]:
    """The JSON object in the regular file ``path``, read with a bound.

    Opened without blocking and checked on the open file: a FIFO, /dev/zero or a huge file can
    neither hang the call nor fill memory, and nothing can be swapped in between check and read.
    On a restricted server the resolved path is opened without following a final symlink.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0)
    if _policy.restricted:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise AdviceError("config_path", f"no config.json at {_shown(path_text)}") from None
    except OSError as exc:
        raise AdviceError("config_path", f"cannot read {_shown(path_text)}: {_reason(exc)}") from None
    with os.fdopen(fd, "rb") as stream:
        if not stat.S_ISREG(os.fstat(stream.fileno()).st_mode):
            raise AdviceError(
                "config_path", f"{_shown(path_text)} is not a regular file or a directory holding config.json"
            )
        try:
            data = stream.read(MAX_CONFIG_BYTES + 1)
        except OSError as exc:
            raise AdviceError("config_path", f"cannot read {_shown(path_text)}: {_reason(exc)}") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise AdviceError("config_path", f"{_shown(path_text)} is larger than {MAX_CONFIG_BYTES // 2**20} MiB")
    raw = _parse_json(data, path_text)
    if not isinstance(raw, dict):
        raise AdviceError("config_path", "config.json must hold a JSON object")
    return raw


def _parse_json(data: bytes, path_text: str) -> Any:
    """The parsed JSON; the reasons it is not say where, never what the file holds."""
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        reason = "it is not UTF-8 text"
    except json.JSONDecodeError as exc:
        reason = f"{exc.msg} at line {exc.lineno} column {exc.colno}"
    except RecursionError:
        reason = "it nests arrays or objects too deeply"
    except ValueError:  # an integer literal longer than Python converts
        reason = "it holds a number too long to read"
    raise AdviceError("config_path", f"cannot read {_shown(path_text)} as JSON: {reason}")
