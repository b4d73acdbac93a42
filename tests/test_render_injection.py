"""render_config against caller text that would become an option or not survive the file it lands in
(issue 20, items 6 and 7). Each value is either refused with a one-line error naming its field, or
its rendered file is read back here with the parsers its real reader uses — shlex for sh, Docker's
--env-file rules, python-dotenv, yaml, json, LMCache's list syntax — and gives the value back in the
same slot. The parsers in this file are written independently of the ones render.py checks with."""

from __future__ import annotations

import io
import json
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from dotenv import dotenv_values
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vllm_caching_mcp.advice import render as render_module
from vllm_caching_mcp.advice.common import AdviceError
from vllm_caching_mcp.advice.render import RenderConfigRequest, RenderConfigResult, render_config
from vllm_caching_mcp.knowledge import Knowledge
from vllm_caching_mcp.tools import ToolInputError, run_tool

# --- independent readers ----------------------------------------------------------------------------

DOCKER_VALUE_OPTIONS = {"--name", "--gpus", "--ipc", "--network", "--entrypoint", "-p", "-e", "-v"}


def sh_words(script: str) -> list[str]:
    """The words sh runs: backslash-newline joins lines, '#' starts a comment."""
    return shlex.split(script.replace("\\\n", ""), comments=True, posix=True)


def docker_run(script: str) -> dict[str, Any]:
    """`docker run [OPTIONS] IMAGE [ARG...]` the way Docker's flag parser reads it: options (with their
    values) until the first word that is not an option; that word is the image."""
    words = sh_words(script)
    assert words[:2] == ["docker", "run"]
    options: list[tuple[str, str | None]] = []
    i = 2
    while words[i].startswith("-"):
        name, eq, inline = words[i].partition("=")
        if name in DOCKER_VALUE_OPTIONS:
            value = inline if eq else words[i + 1]
            i += 1 if eq else 2
        else:
            value, i = None, i + 1
        options.append((name, value))
    values = [v for k, v in options if k == "--entrypoint"]
    return {"options": options, "image": words[i], "argv": [*values, *words[i + 1 :]]}


def docker_env_file(text: str) -> list[tuple[str, str]]:
    """`docker run --env-file`: one NAME=VALUE a line, the value verbatim, '#' lines skipped."""
    pairs = []
    for line in text.split("\n"):
        line = line.lstrip()
        if line and not line.startswith("#"):
            name, eq, value = line.partition("=")
            assert eq, f"a line without '=' takes its value from the host: {line!r}"
            pairs.append((name, value))
    return pairs


def lmcache_list(value: str) -> list[str]:
    """LMCache 0.4.4+'s reading of local_disk / gds_path: comma-separated, each entry stripped, file:// dropped."""
    return [p.strip().removeprefix("file://") for p in value.split(",") if p.strip()]


def render(knowledge: Knowledge, **arguments: Any) -> RenderConfigResult:
    arguments.setdefault("model", "Qwen/Qwen3-8B")
    arguments.setdefault("name", "vllm")  # the names these tests look for; the default has its own test
    return render_config(RenderConfigRequest.model_validate(arguments), knowledge)


def call(**arguments: Any) -> RenderConfigResult:
    arguments.setdefault("model", "Qwen/Qwen3-8B")
    arguments.setdefault("name", "vllm")  # the names these tests look for; the default has its own test
    result = run_tool("render_config", arguments)
    assert isinstance(result, RenderConfigResult)
    return result


def file(result: RenderConfigResult, name: str) -> str:
    return next(f.content for f in result.files if f.name == name)


LMCACHE = {"backend": "lmcache", "version": "0.33.0", "lmcache_version": "0.4.4"}
LMCACHE_SIZES = {"kv_offloading_size_gib": 8, "disk_gib": 10}


# --- item 6: values that become options -------------------------------------------------------------


@pytest.mark.parametrize("field", ["image", "lmcache_image"])
def test_an_image_that_is_an_option_is_refused(field: str) -> None:
    with pytest.raises(ToolInputError, match=rf"^{field}: .*image reference"):
        call(backend="lmcache_mp", sizes={"kv_offloading_size_gib": 8}, format="docker_run", **{field: "-v=/:/host"})


@pytest.mark.parametrize("role", ["prefill", "decode"])
def test_a_proxy_host_that_is_an_option_is_refused(role: str) -> None:
    with pytest.raises(ToolInputError, match=rf"^hosts\.{role}: must be a host name"):
        call(backend="nixl_pd", version="0.33.0", hosts={role: "--port=1"})


def test_the_check_after_rendering_reads_the_docker_image_slot_word_by_word(knowledge: Knowledge) -> None:
    # Past the request's own validation, as a future planner bug would be: the check must still see it.
    request = RenderConfigRequest.model_validate(
        {"backend": "native_cpu", "model": "m", "sizes": {"kv_offloading_size_gib": 1}, "format": "docker_run"}
    )
    request.image = "-v=/:/host"
    with pytest.raises(AdviceError, match=r"^image: .*would be read as an option"):
        render_config(request, knowledge)


@pytest.mark.parametrize("role", ["prefill", "decode"])
def test_the_check_after_rendering_refuses_an_option_in_a_proxy_value_slot(knowledge: Knowledge, role: str) -> None:
    request = RenderConfigRequest.model_validate({"backend": "nixl_pd", "version": "0.33.0", "model": "m"})
    setattr(request.hosts, role, "--port=1")
    with pytest.raises(AdviceError, match=rf"^hosts\.{role}: proxy: '--port=1' would be read as an option"):
        render_config(request, knowledge)


def test_docker_run_reads_back_as_docker_would(knowledge: Knowledge) -> None:
    result = render(knowledge, **LMCACHE, sizes=LMCACHE_SIZES, paths={"disk": ["/mnt/nvme0"]}, format="docker_run")
    run = docker_run(file(result, "vllm.sh"))
    assert run["image"] == "vllm/vllm-openai:v0.33.0"
    assert run["argv"][:3] == ["vllm", "serve", "Qwen/Qwen3-8B"]
    assert ("-v", "/mnt/nvme0:/mnt/nvme0") in run["options"]
    assert ("-e", "LMCACHE_LOCAL_DISK=file:///mnt/nvme0") in run["options"]


def test_a_mount_that_docker_would_split_differently_is_caught_after_rendering(
    knowledge: Knowledge, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With the format check out of the way, `-v /a:b:/a:b` must still not pass as "read back as planned".
    monkeypatch.setattr(render_module, "_check_paths_fit_format", lambda request: None, raising=False)
    with pytest.raises(AdviceError, match=r"^format: vllm\.sh: .*read back as planned"):
        render(knowledge, **LMCACHE, sizes=LMCACHE_SIZES, paths={"disk": ["/a:b"]}, format="docker_run")


def test_a_mounted_path_with_a_colon_is_refused_for_docker_run() -> None:
    with pytest.raises(ToolInputError, match=r"^paths\.disk\.0: docker run -v .*':'"):
        call(**LMCACHE, sizes=LMCACHE_SIZES, paths={"disk": ["/mnt/a:ro"]}, format="docker_run")
    # Kubernetes' hostPath carries it.
    assert call(**LMCACHE, sizes=LMCACHE_SIZES, paths={"disk": ["/mnt/a:ro"]}, format="kubernetes").files


# --- item 7: values that do not round-trip ----------------------------------------------------------

FIELDS_WITH_NUL = [
    ("model", {"model": "org/m\x00odel"}),
    ("image", {"image": "img\x00:1"}),
    ("lmcache_image", {"lmcache_image": "lm\x00cache"}),
    ("hosts.prefill", {"hosts": {"prefill": "10.0.0.1\x00"}}),
    ("hosts.this_instance", {"hosts": {"this_instance": "a\x00b"}}),
    ("paths.disk.0", {"paths": {"disk": ["/mnt/\x00kv"]}}),
    ("paths.gds.1", {"paths": {"gds": ["/g", "/mnt/\x00gds"]}}),
    ("object_store.bucket", {"object_store": {"bucket": "b\x00", "endpoint_override": "http://s3"}}),
    ("name", {"name": "vllm\x00"}),
]


@pytest.mark.parametrize(("field", "arguments"), FIELDS_WITH_NUL, ids=[f for f, _ in FIELDS_WITH_NUL])
def test_a_nul_byte_is_refused_naming_the_field(field: str, arguments: dict[str, Any]) -> None:
    # sh drops NUL from a word, so the program would get another value than the plan and the check saw.
    with pytest.raises(ToolInputError, match=rf"^{re.escape(field)}: "):
        call(backend="native_cpu", sizes={"kv_offloading_size_gib": 1}, **arguments)


@pytest.mark.parametrize(
    ("field", "arguments"),
    [
        ("hosts.prefill", {"backend": "nixl_pd", "hosts": {"prefill": "10.0.0.1\nLD_PRELOAD=/tmp/x.so"}}),
        ("paths.disk.0", {**LMCACHE, "sizes": LMCACHE_SIZES, "paths": {"disk": ["/kv\nLD_PRELOAD=/tmp/x.so"]}}),
        ("name", {"backend": "nixl_pd", "name": "vllm\n"}),
    ],
)
def test_a_newline_that_would_add_an_env_file_line_is_refused(field: str, arguments: dict[str, Any]) -> None:
    with pytest.raises(ToolInputError, match=rf"^{re.escape(field)}: "):
        call(**arguments, format="env_file")


def test_a_comma_in_an_lmcache_disk_path_is_refused_instead_of_adding_a_disk() -> None:
    with pytest.raises(ToolInputError, match=r"^paths\.disk\.0: .*','"):
        call(**LMCACHE, sizes=LMCACHE_SIZES, paths={"disk": ["/mnt/nvme,file:///etc"]}, format="lmcache_yaml")
    with pytest.raises(ToolInputError, match=r"^paths\.gds\.0: .*','"):
        call(**LMCACHE, sizes={"kv_offloading_size_gib": 8, "gds_buffer_mib": 64}, paths={"gds": ["/g,/etc"]})


def test_lmcache_reads_back_the_disk_list_it_was_given(knowledge: Knowledge) -> None:
    disks = ["/mnt/nvme0/kv", "/mnt/nvme1/kv"]
    arguments = {**LMCACHE, "sizes": LMCACHE_SIZES, "paths": {"disk": disks}}
    config = yaml.safe_load(file(render(knowledge, **arguments, format="lmcache_yaml"), "vllm.yaml"))
    assert lmcache_list(config["local_disk"]) == disks
    env = dict(docker_env_file(file(render(knowledge, **arguments, format="env_file"), "vllm.env")))
    assert lmcache_list(env["LMCACHE_LOCAL_DISK"]) == disks


def test_a_path_with_a_trailing_space_is_refused_since_lmcache_strips_it() -> None:
    with pytest.raises(ToolInputError, match=r"^paths\.disk\.0: must be an absolute"):
        call(**LMCACHE, sizes=LMCACHE_SIZES, paths={"disk": ["/mnt/kv "]})


def test_a_relative_path_is_refused_since_docker_would_make_it_a_named_volume() -> None:
    with pytest.raises(ToolInputError, match=r"^paths\.disk\.0: must be an absolute"):
        call(**LMCACHE, sizes=LMCACHE_SIZES, paths={"disk": ["kv"]}, format="docker_run")


def test_an_env_file_reads_the_same_in_docker_dotenv_and_sh(knowledge: Knowledge) -> None:
    result = render(
        knowledge,
        backend="lmcache_p2p",
        version="0.33.0",
        lmcache_version="0.4.4",
        sizes=LMCACHE_SIZES,
        paths={"disk": ["/mnt/nvme0/kv"]},
        hosts={"this_instance": "10.0.0.7", "controller": "ctrl.example"},
        format="env_file",
    )
    text = file(result, "vllm-0.env")
    docker = docker_env_file(text)
    assert dict(docker) == dotenv_values(stream=io.StringIO(text))
    assert dict(docker) == dict(w.split("=", 1) for w in sh_words(text))
    assert dict(docker)["LMCACHE_P2P_HOST"] == "10.0.0.7"
    assert dict(docker)["LMCACHE_CONTROLLER_PULL_URL"].startswith("ctrl.example:")
    assert "Docker" in " ".join(result.checks) and "dotenv" in " ".join(result.checks)


@pytest.mark.parametrize("path", ["/mnt/my disk", "/mnt/'kv'", "/mnt/$HOME", "/mnt/a#b"])
def test_an_env_file_refuses_a_path_docker_would_read_with_its_quotes(path: str) -> None:
    # Docker's --env-file does no quote processing: a shell-quoted value would arrive with its quotes.
    with pytest.raises(ToolInputError, match=r"^paths\.disk\.0: the env_file format"):
        call(**LMCACHE, sizes=LMCACHE_SIZES, paths={"disk": [path]}, format="env_file")
    # The other formats quote it and carry it.
    result = call(**LMCACHE, sizes=LMCACHE_SIZES, paths={"disk": [path]}, format="vllm_serve")
    env = dict(w.split("=", 1) for w in sh_words(file(result, "vllm.sh")) if w.startswith("LMCACHE_"))
    assert lmcache_list(env["LMCACHE_LOCAL_DISK"]) == [path]


def test_an_env_file_value_that_would_add_a_line_is_not_written(
    knowledge: Knowledge, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A value carrying a newline, past every earlier check, must not reach the file.
    monkeypatch.setattr(render_module, "_check_paths_fit_format", lambda request: None, raising=False)
    request = RenderConfigRequest.model_validate(
        {**LMCACHE, "model": "m", "sizes": LMCACHE_SIZES, "format": "env_file"}
    )
    request.paths.disk = ["/kv\nLD_PRELOAD=/tmp/x.so"]
    with pytest.raises(AdviceError, match=r"^format: .*cannot be written bare in an env file"):
        render_config(request, knowledge)


def test_the_env_file_check_reads_it_as_docker_does(knowledge: Knowledge, monkeypatch: pytest.MonkeyPatch) -> None:
    # Shell-quoted values (what env files held before) read fine in sh; Docker keeps the quotes.
    environment = render_module._environment(str(Path(knowledge.directory) / "templates"))
    monkeypatch.setitem(environment.filters, "envfile", shlex.quote)
    monkeypatch.setattr(render_module, "_check_paths_fit_format", lambda request: None, raising=False)
    with pytest.raises(AdviceError, match=r"^format: vllm\.env: Docker's --env-file does not read the env file"):
        render(knowledge, **LMCACHE, sizes=LMCACHE_SIZES, paths={"disk": ["/mnt/my disk"]}, format="env_file")


@pytest.mark.parametrize("text", ["null", "Null", "NULL", "true", "no", "0x10"])
def test_text_that_yaml_would_read_as_another_type_stays_text(knowledge: Knowledge, text: str) -> None:
    args = {"backend": "lmcache_mp", "sizes": {"kv_offloading_size_gib": 8}, "image": text.lower(), "model": text}
    docs = [d for d in yaml.safe_load_all(render(knowledge, **args, format="kubernetes").files[0].content) if d]
    images = {
        d["metadata"]["name"]: d["spec"]["template"]["spec"]["containers"][0] for d in docs if "template" in d["spec"]
    }
    assert images["vllm-vllm"]["image"] == text.lower() and images["vllm-vllm"]["args"][1] == text
    run = docker_run(file(render(knowledge, **args, format="docker_run"), "vllm.sh"))
    assert run["image"] == text.lower() and run["argv"][2] == text


@pytest.mark.parametrize(
    ("field", "arguments"),
    [
        ("image", {"image": ""}),
        ("lmcache_image", {"lmcache_image": ""}),
        ("hosts.lmcache_server", {"hosts": {"lmcache_server": ""}}),
        ("image", {"image": "~"}),
    ],
)
def test_empty_or_yaml_null_text_is_refused_rather_than_taken_as_absent(field: str, arguments: dict[str, Any]) -> None:
    # An empty image used to render the default image, as if none were given.
    with pytest.raises(ToolInputError, match=rf"^{re.escape(field)}: "):
        call(backend="lmcache_mp", sizes={"kv_offloading_size_gib": 8}, format="docker_run", **arguments)


def test_a_given_image_is_recorded_as_the_callers() -> None:
    values = {v.name: v for v in call(backend="native_cpu", sizes={"kv_offloading_size_gib": 1}, image="null").values}
    assert values["image"].value == "null" and values["image"].origin == "user"


# --- property: any text in any string field is refused naming it, or read back in its slot ----------------


def env_of(script: str) -> dict[str, str]:
    """The NAME=value words before the command in a vllm_serve script."""
    env = {}
    for word in sh_words(script):
        name, eq, value = word.partition("=")
        if not (eq and name.isupper()):
            break
        env[name] = value
    return env


def env_file_of(text: str) -> dict[str, str]:
    """An env file's values; Docker's rules and python-dotenv must agree on them."""
    docker = dict(docker_env_file(text))
    assert docker == dotenv_values(stream=io.StringIO(text))
    return docker


def containers(result: RenderConfigResult) -> dict[str, dict[str, Any]]:
    docs = [d for d in yaml.safe_load_all(result.files[0].content) if d]
    return {
        d["metadata"]["name"]: d["spec"]["template"]["spec"]["containers"][0] for d in docs if "template" in d["spec"]
    }


def k8s_env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"].replace("$$", "$") for e in container.get("env", []) if "value" in e}


def after(words: list[str], option: str) -> str:
    return words[words.index(option) + 1]


def ktc(words: list[str]) -> dict[str, Any]:
    return json.loads(after(words, "--kv-transfer-config"))  # type: ignore[no-any-return]


def disk_slots(result: RenderConfigResult, fmt: str) -> list[str]:
    """Every place the first disk path lands: LMCache's reading of local_disk, and the mount."""
    if fmt == "vllm_serve":
        return lmcache_list(env_of(file(result, "vllm.sh"))["LMCACHE_LOCAL_DISK"])
    if fmt == "env_file":
        return lmcache_list(env_file_of(file(result, "vllm.env"))["LMCACHE_LOCAL_DISK"])
    if fmt == "lmcache_yaml":
        return lmcache_list(yaml.safe_load(file(result, "vllm.yaml"))["local_disk"])
    if fmt == "docker_run":
        run = docker_run(file(result, "vllm.sh"))
        volumes = [v for k, v in run["options"] if k == "-v" and v and not v.endswith(":/root/.cache/huggingface")]
        mounts = [part for v in volumes for part in v.split(":")]
        env = dict(v.split("=", 1) for k, v in run["options"] if k == "-e" and v and "=" in v)
        return [*mounts, *lmcache_list(env["LMCACHE_LOCAL_DISK"])]
    c = containers(result)["vllm-vllm"]
    data = [m["mountPath"] for m in c["volumeMounts"] if m["name"].startswith("data-")]
    return [*data, *lmcache_list(k8s_env(c)["LMCACHE_LOCAL_DISK"])]


def model_slot(result: RenderConfigResult, fmt: str) -> list[str]:
    if fmt == "kubernetes":
        return [containers(result)["vllm-vllm"]["args"][1].replace("$$", "$")]
    if fmt == "docker_run":
        return [docker_run(file(result, "vllm.sh"))["argv"][2]]
    return [sh_words(file(result, "vllm.sh"))[2]]


def image_slot(result: RenderConfigResult, fmt: str, component: str) -> list[str]:
    if fmt == "kubernetes":
        return [containers(result)[f"vllm-{component}"]["image"]]
    return [docker_run(file(result, f"{component}.sh"))["image"]]


def store_slot(key: str) -> Any:
    def slot(result: RenderConfigResult, fmt: str) -> list[str]:
        tier = json.loads(file(result, "vllm.json"))["kv_connector_extra_config"]["secondary_tiers"][0]
        return [tier.get("prefix", "") if key == "prefix" else tier["store_config"][key]]

    return slot


OBJ = {"backend": "native_tiering", "version": "0.33.0", "tiers": ["obj"], "sizes": {"kv_offloading_size_gib": 4}}
STORE = {"bucket": "kv", "endpoint_override": "http://s3.local:9000", "prefix": "p"}
NATIVE = {"backend": "native_cpu", "sizes": {"kv_offloading_size_gib": 1}}
P2P = {"backend": "lmcache_p2p", "sizes": {"kv_offloading_size_gib": 1}}
MP = {"backend": "lmcache_mp", "sizes": {"kv_offloading_size_gib": 1}}
PD = {"backend": "nixl_pd", "version": "0.33.0"}
HOST_HEADS = ["10.0.0.1", "node-1.example", "null"]
HOST_CHARS = "az09-_."
IMAGE_CHARS = "az09-_.:/"
PATH_CHARS = "aZ9/._-=:@%+ '\"$#`~"


def prefill_slots(result: RenderConfigResult, fmt: str) -> list[str]:
    if fmt == "env_file":
        return [env_file_of(file(result, "prefill.env"))["VLLM_NIXL_SIDE_CHANNEL_HOST"]]
    return [
        after(sh_words(file(result, "proxy.sh")), "--prefiller-hosts"),
        env_of(file(result, "prefill.sh"))["VLLM_NIXL_SIDE_CHANNEL_HOST"],
    ]


def lmcache_server_slot(result: RenderConfigResult, fmt: str) -> list[str]:
    extra = ktc(sh_words(file(result, "vllm.sh")))["kv_connector_extra_config"]
    return [extra["lmcache.mp.host"].removeprefix("tcp://")]


@dataclass
class Case:
    arguments: dict[str, Any]
    formats: list[str]
    slot: Callable[[RenderConfigResult, str], list[str]]
    heads: list[str]  # how a valid value of the field starts, and what it is mostly made of, so that
    alphabet: str  # the read-back branch is drawn as often as the refusals


CASES: dict[str, Case] = {
    "model": Case(
        NATIVE, ["vllm_serve", "docker_run", "kubernetes"], model_slot, ["org/m", "/models/m"], "aZ9/._-=: '$\"`"
    ),
    "image": Case(
        NATIVE,
        ["docker_run", "kubernetes"],
        lambda r, f: image_slot(r, f, "vllm"),
        ["vllm/vllm-openai:", "null"],
        IMAGE_CHARS,
    ),
    "lmcache_image": Case(
        MP,
        ["docker_run", "kubernetes"],
        lambda r, f: image_slot(r, f, "lmcache-server"),
        ["lmcache/server:", "x"],
        IMAGE_CHARS,
    ),
    "hosts.prefill": Case(PD, ["vllm_serve", "env_file"], prefill_slots, HOST_HEADS, HOST_CHARS),
    "hosts.decode": Case(
        PD,
        ["vllm_serve"],
        lambda r, f: [after(sh_words(file(r, "proxy.sh")), "--decoder-hosts")],
        HOST_HEADS,
        HOST_CHARS,
    ),
    "hosts.this_instance": Case(
        P2P, ["env_file"], lambda r, f: [env_file_of(file(r, "vllm-0.env"))["LMCACHE_P2P_HOST"]], HOST_HEADS, HOST_CHARS
    ),
    "hosts.controller": Case(
        P2P,
        ["vllm_serve"],
        lambda r, f: [env_of(file(r, "vllm-0.sh"))["LMCACHE_CONTROLLER_PULL_URL"].rsplit(":", 1)[0]],
        HOST_HEADS,
        HOST_CHARS,
    ),
    "hosts.lmcache_server": Case(MP, ["vllm_serve"], lmcache_server_slot, HOST_HEADS, HOST_CHARS),
    "paths.disk.0": Case(
        {**LMCACHE, "sizes": LMCACHE_SIZES},
        ["vllm_serve", "docker_run", "env_file", "lmcache_yaml", "kubernetes"],
        disk_slots,
        ["/mnt/", "/"],
        PATH_CHARS,
    ),
    "paths.gds.0": Case(
        {**LMCACHE, "sizes": {"kv_offloading_size_gib": 8, "gds_buffer_mib": 64}},
        ["vllm_serve"],
        lambda r, f: lmcache_list(env_of(file(r, "vllm.sh"))["LMCACHE_GDS_PATH"]),
        ["/mnt/", "/"],
        PATH_CHARS,
    ),
    **{
        f"object_store.{key}": Case(
            {**OBJ, "object_store": STORE}, ["kv_transfer_config"], store_slot(key), ["kv"], PATH_CHARS
        )
        for key in STORE
    },
    "name": Case(
        NATIVE, ["kubernetes"], lambda r, f: [n.removesuffix("-vllm") for n in containers(r)], ["vllm"], "az09-"
    ),
    "namespace": Case(
        NATIVE,
        ["kubernetes"],
        lambda r, f: [d["metadata"]["namespace"] for d in yaml.safe_load_all(r.files[0].content) if d],
        ["team", "null"],
        "az09-",
    ),
}

FRAGMENTS = [
    "", "null", "~", "None", "-", "--port=1", "-v=/:/host", "\x00", "\n", "\r", "\t", "\x85", "\u2028", "\u202e",
    ",", ":", "=", "#", " ", "'", '"', "\\", ";", "$(id)", "`id`", "${HOME}", "$$", "file://", "/", ".", "..",
    "a", "kv", "Z9", "_", "-x", "é", "10.0.0.1",
]  # fmt: skip
TEXT = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=3)), max_size=6).map("".join)


def with_value(arguments: dict[str, Any], field: str, text: str) -> dict[str, Any]:
    head, _, rest = field.partition(".")
    if not rest:
        return {**arguments, head: text}
    inner = dict(arguments.get(head, {}))
    key, _, index = rest.partition(".")
    inner[key] = [text] if index == "0" else text
    return {**arguments, head: inner}


@pytest.mark.parametrize("field", sorted(CASES))
def test_any_text_in_a_field_is_refused_naming_it_or_read_back_in_its_slot(field: str) -> None:
    case = CASES[field]
    # Half the draws start the way a valid value does, so both outcomes are exercised.
    heads = st.sampled_from(case.heads)
    values = st.one_of(
        TEXT, st.builds(str.__add__, heads, TEXT), st.builds(str.__add__, heads, st.text(case.alphabet, max_size=8))
    )

    @settings(max_examples=40, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(fmt=st.sampled_from(case.formats), text=values)
    def check(fmt: str, text: str) -> None:
        try:
            result = call(**with_value(case.arguments, field, text), format=fmt)
        except ToolInputError as exc:
            assert str(exc).startswith(f"{field}: "), str(exc)
            assert "\n" not in str(exc) and "Traceback" not in str(exc)
            return
        found = case.slot(result, fmt)
        assert found and all(value == text for value in found), (found, text)

    check()
