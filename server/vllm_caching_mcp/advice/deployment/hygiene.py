"""Deployment hygiene: what a reviewer flags around any vLLM workload, whatever reader found it: secrets
written into the files, packages installed at start-up, image tags that move, Kubernetes env values it
does not expand, keys written twice, liveness probes that kill a model still loading, and a
ReadWriteOnce claim shared by replicas. The readers call the checks that need a document's nodes; the
rest run once over the read deployment (`finish`). No finding carries a secret's value."""

from __future__ import annotations

import base64
import binascii
import re

from ... import redact
from .bounds import clip
from .chart_template import without_actions
from .model import ClaimSpec, ClaimUse, Deployment, Document, EnvUse, HygieneIssue, Location, Workload
from .yaml_nodes import DuplicateKey, Located, node_location, text_of

# --- secrets -----------------------------------------------------------------------------------

# Variables whose name says they hold a secret (HF_TOKEN, HUGGING_FACE_HUB_TOKEN, VLLM_API_KEY, ...).
_SECRET_NAME = re.compile(r"(?:^|_)(?:API_?KEY|TOKEN|PASSWORD|PASSWD|SECRET|SECRET_KEY|SECRET_ACCESS_KEY)$", re.I)
# Variables that hold a user and a password together (NEO4J_AUTH=neo4j/password, BASIC_AUTH=user:password).
_CREDENTIALS_NAME = re.compile(r"(?:^|_)(?:AUTH|BASIC_AUTH|CREDENTIALS)$", re.I)
_USER_AND_PASSWORD = re.compile(r"^[^/:\s]+[/:](?P<password>[^/:\s]+)$")
# A URL with a password in it (postgres://app:s3cret@db:5432/x, redis://:s3cret@cache:6379), whatever holds it.
_URL_PASSWORD = re.compile(r"^[a-z][\w+.-]*://[^/\s:@]*:(?P<password>[^@\s/]+)@", re.I)
# Options whose value is a secret: vLLM's --api-key and --hf-token, and any --*-token / --*-password.
_SECRET_FLAG = re.compile(r"^--(?:[\w-]+-)?(?:api-key|token|password|secret)$")
# Keys of the services deployments use, recognisable by their prefix whatever variable holds them.
_KEY_PREFIX = re.compile(
    r"^(?:sk-(?:proj-)?|hf_|ghp_|gho_|github_pat_|glpat-|nvapi-|xox[abprs]-|AKIA)(?P<rest>\S{8,})$"
)
# What stands in for a secret in examples and templates: not a secret written in.
_PLACEHOLDER_MARK = re.compile(r"[<>{}$`]|\.\.\.|…")
_PLACEHOLDER_WORD = re.compile(
    r"your|changeme|change[-_]?me|placeholder|replace|example|dummy|fake|insert|redacted|fill[-_]?in|_here\b|todo",
    re.I,
)
_PLACEHOLDER_VALUE = {
    "none", "null", "nil", "empty", "test", "secret", "token", "password", "key", "apikey", "api-key", "api_key",
    "true", "false", "yes", "no",
}  # fmt: skip


def _placeholder(value: str) -> bool:
    """``<your-token>``, ``xxx``, ``changeme``, ``$(HF_TOKEN)``, ``${HF_TOKEN}``, ``EMPTY``, a number: no secret."""
    text = value.strip().strip("\"'")
    return (
        not text
        or _PLACEHOLDER_MARK.search(text) is not None
        or _PLACEHOLDER_WORD.search(text) is not None
        or text.lower() in _PLACEHOLDER_VALUE
        or len(set(text.lower())) <= 2  # xxx, ****, 0000, x-x
        or re.fullmatch(r"[\d.]+", text) is not None
        # words that name what belongs there: hf_token, my-api-key, SECRET_KEY
        or (
            re.fullmatch(r"[A-Za-z_.-]+", text) is not None
            and re.search(r"token|key|secret|passw", text, re.I) is not None
        )
    )


def written_secret(value: str | None, named_secret: bool) -> bool:
    """Whether ``value``, written literally, is a secret: a service key by its prefix (sk-…, hf_…) wherever it
    is, or any literal that is no placeholder where the name says it is a secret."""
    if value is None:
        return False
    in_url = _URL_PASSWORD.match(value.strip())
    if in_url is not None:
        return not _placeholder(in_url["password"])
    if _placeholder(value):
        return False
    keyed = _KEY_PREFIX.match(value.strip())
    if keyed is not None:
        return not _placeholder(keyed["rest"])
    return named_secret


def _names_secret(name: str, value: str) -> bool:
    """Whether a variable's name says its value is a secret (HF_TOKEN), or that it pairs a user with a password
    its value holds (NEO4J_AUTH=neo4j/password)."""
    if _SECRET_NAME.search(name) is not None:
        return True
    paired = _USER_AND_PASSWORD.match(value.strip()) if _CREDENTIALS_NAME.search(name) else None
    return paired is not None and not _placeholder(paired["password"])


# A shorter literal is not masked in other text: masking a weak key such as "vllm" would mangle every image name.
_REDACTED_LENGTH = 12


def _shown(value: str) -> str:
    """What a finding says of a secret: its kind and length, never its characters."""
    keyed = _KEY_PREFIX.match(value.strip())
    if len(value) >= _REDACTED_LENGTH:
        redact.register(value, transient=True)  # any other text that carries it leaves the process masked
    kind = f"a {keyed.group().removesuffix(keyed['rest'])}… key" if keyed else "a literal value"
    return f"{kind} of {len(value)} characters"


def secret_issues(workload: Workload) -> list[HygieneIssue]:
    """Secrets written literally into the workload's arguments or environment (not from a Secret, an env
    file or a variable the shell or Kubernetes fills in)."""
    found = []
    for flag in workload.flags:
        value = flag.value
        if not isinstance(value, str) or flag.unresolved is not None or "$" in flag.written:
            continue
        if written_secret(value, _SECRET_FLAG.match(flag.name) is not None):
            found.append(
                HygieneIssue(
                    check="secret-in-plain-text",
                    text=f"{flag.name} is given {_shown(value)} in the file; anyone who can read it has the secret",
                    location=flag.location,
                )
            )
    return found + env_secret_issues(workload.env)


def env_secret_issues(env: list[EnvUse], whose: str = "") -> list[HygieneIssue]:
    """Variables set to a secret written literally (not from an env file or the host's environment);
    ``whose``: the service they belong to, when it is not the vLLM server."""
    found = []
    for use in env:
        if use.reference is not None:
            continue  # set from elsewhere (a compose .env file): not written here
        if use.value is not None and written_secret(use.value, _names_secret(use.name, use.value)):
            found.append(
                HygieneIssue(
                    check="secret-in-plain-text",
                    text=f"{whose}{use.name} is set to {_shown(use.value)} written in the file",
                    location=use.location,
                )
            )
    return found


def values_secret_issue(doc: Document, item: Located | None, key: str) -> HygieneIssue | None:
    """A Helm value a chart turns into a Secret, written in the values file as a literal (not a reference
    to an existing Secret, which the charts take as a mapping)."""
    if item is None or not isinstance(item.value, str) or not written_secret(item.value, True):
        return None
    return HygieneIssue(
        check="secret-in-plain-text",
        text=f"{key} is {_shown(item.value)} in the values file: the chart stores it in a Secret, but the values "
        "file (and the release's stored values) holds it in plain text; name an existing Secret "
        "({secretName, secretKey})",
        location=node_location(doc, item),
    )


# --- image tags ----------------------------------------------------------------------------------

_MOVING_TAGS = {"latest", "nightly", "main", "master", "dev", "develop", "edge", "stable", "head", "canary", "release"}
# vLLM's own images are tagged with releases (v0.22.1, v0.22.1-cu130) and dated or commit nightlies; any
# other tag on them (gptoss, a model's name) is a feature build that is pushed again, not a release.
_OFFICIAL_REPOSITORY = re.compile(r"(^|/)vllm/vllm-(openai|tpu|cpu)[\w-]*$")


def placeholder_image(image: str) -> bool:
    """An image reference that stands in for one set elsewhere (``${IMAGE}``, ``<image>``, ``replaced-by-kustomize``,
    ``IMAGE_PLACEHOLDER``): a base an overlay, a replacement or a pipeline completes. A placeholder word counts
    only in a bare name without a tag, where no registry would hold such an image."""
    text = image.strip().strip("\"'")
    if _PLACEHOLDER_MARK.search(text):
        return True
    return "/" not in text and ":" not in text and _PLACEHOLDER_WORD.search(text) is not None


def floating_tag(image: str) -> str | None:
    """The moving tag an image reference runs (``latest`` for none); None for a release tag or a digest."""
    text = image.strip().strip("\"'")
    if not text or "@" in text or placeholder_image(text):
        return None  # pinned by digest, or a template the files fill in elsewhere
    name = text.rsplit("/", 1)[-1]
    if ":" not in name:
        return "latest"
    tag = name.rsplit(":", 1)[1].lower()
    if tag in _MOVING_TAGS:
        return tag
    moving = re.fullmatch(r"(latest|nightly)-[\w.-]+|[\w.-]+-(latest|nightly)", tag) is not None
    dated = re.search(r"\d{4}-?\d{2}-?\d{2}|[0-9a-f]{7,}", tag) is not None  # a dated or commit build
    if _is_official_feature_tag(text, tag) and not dated:
        return tag
    return tag if moving and not dated else None


def _is_official_feature_tag(image: str, tag: str) -> bool:
    repository = image.rsplit(":", 1)[0]
    return _OFFICIAL_REPOSITORY.search(repository) is not None and re.match(r"v?\d+\.\d+", tag) is None


def image_issue(image: str | None, location: Location | None, what: str = "") -> HygieneIssue | None:
    tag = floating_tag(image) if image else None
    if tag is None or location is None:
        return None
    untagged = ":" not in (image or "").rsplit("/", 1)[-1]
    if untagged:
        written = "no tag (Docker pulls :latest)"
    elif tag not in _MOVING_TAGS and _is_official_feature_tag(image or "", tag):
        written = f"the tag :{tag}, which names no vLLM release (a feature build, pushed again)"
    else:
        written = f"the moving tag :{tag}"
    return HygieneIssue(
        check="floating-image-tag",
        text=f"{what}{clip(image or '', 100)} has {written}: the release it runs changes with each pull",
        location=location,
    )


def pulled_image_issue(texts: list[str], location: Location) -> HygieneIssue | None:
    """`docker pull` (or podman's) of a vLLM image by a moving tag: what the script runs next changes with each pull."""
    from .launch import is_vllm_image  # launch reads hygiene's checks

    words = texts[1:] if texts and texts[0] == "sudo" else texts
    if len(words) < 3 or words[0].rsplit("/", 1)[-1] not in ("docker", "podman") or words[1] != "pull":
        return None
    image = next((w for w in words[2:] if not w.startswith("-")), None)
    if image is None or not is_vllm_image(image):
        return None
    return image_issue(image, location, "docker pull: ")


# --- start-up installs ---------------------------------------------------------------------------

# Options of pip, uv pip and the system package managers that take the next word as their value.
_INSTALL_VALUE_OPTIONS = {
    "-r", "--requirement", "-c", "--constraint", "-i", "--index-url", "--extra-index-url", "-f", "--find-links",
    "-t", "--target", "--prefix", "--root", "--trusted-host", "-e", "--editable", "--python", "-p",
    "--upgrade-strategy", "--platform", "--src", "--cache-dir", "--timeout", "--retries", "--index-strategy",
    "--torch-backend", "--index", "-o", "--option",
}  # fmt: skip


def _install_words(words: list[str]) -> tuple[str, list[int]] | None:
    """The installer and the indexes of the words that follow its ``install``; None for another command."""
    bases = [w.rsplit("/", 1)[-1] for w in words]
    for i, base in enumerate(bases[:-1]):
        after = bases[i + 1]
        if re.fullmatch(r"pip[\d.]*", base) and after == "install":
            return "pip", list(range(i + 2, len(words)))
        if base == "uv" and after == "pip" and i + 2 < len(bases) and bases[i + 2] == "install":
            return "pip", list(range(i + 3, len(words)))
        if re.fullmatch(r"python[\d.]*", base) and after == "-m" and bases[i + 2 : i + 4] == ["pip", "install"]:
            return "pip", list(range(i + 4, len(words)))
        if base in ("apt-get", "apt", "yum", "dnf", "microdnf") and after == "install":
            return "system", list(range(i + 2, len(words)))
        if base == "apk" and after == "add":
            return "system", list(range(i + 2, len(words)))
    return None


def _package_name(spec: str) -> str:
    return re.split(r"[\[<>=!~;@ ]", spec, maxsplit=1)[0].lower().replace("_", "-")


def _pinned(spec: str, installer: str) -> bool:
    if installer == "system":
        return "=" in spec
    if re.search(r"===?", spec) and not re.search(r"[<>!~]=|[<>]", spec):
        return True
    if "://" in spec:
        return _url_pinned(spec)
    local = spec.startswith((".", "/", "~")) or spec.endswith((".whl", ".tar.gz"))  # a source tree or a file
    return local or "@" in spec or "/" in spec


_COMMIT = re.compile(r"(?<![0-9a-f])[0-9a-f]{40}(?![0-9a-f])")
_VERSION_REF = re.compile(r"v?\d+(\.\d+)+([.-]?\w+)?")


def _url_pinned(spec: str) -> bool:
    """Whether a URL install names one build: a commit, a hash, a release asset or a version tag. A branch
    (`raw.githubusercontent.com/o/r/main/...whl`, `git+https://...@main`, a repository with no ref) is not: what
    it installs changes with each push."""
    if _COMMIT.search(spec) or "#sha256=" in spec or "/releases/download/" in spec:
        return True
    named = re.match(r"[\w.-]+@(?=\w[\w+]*://)", spec)  # `name@https://...`: the URL after the name
    url = spec[named.end() :] if named else spec
    if url.startswith("git+"):
        ref = url.rsplit("@", 1)[1].split("#", 1)[0] if url.count("@") and "://" in url.rsplit("@", 1)[0] else ""
        return _VERSION_REF.fullmatch(ref) is not None
    parts = url.split("://", 1)[-1].split("/")
    if parts[0] in ("raw.githubusercontent.com", "github.com") and len(parts) > 3:
        ref = parts[4] if parts[0] == "github.com" and len(parts) > 4 and parts[3] in ("raw", "blob") else parts[3]
        return _VERSION_REF.fullmatch(ref) is not None
    return True  # another server's file: what it holds is not known here


def install_issues(words: list[tuple[str, bool]], location: Location) -> list[HygieneIssue]:
    """What one command that installs packages before vLLM starts does wrong. ``words`` are the command's
    words as written, each with whether an unquoted ``>`` or ``<`` in it is a redirection to the shell."""
    found = _install_words([w for w, _ in words])
    if found is None:
        return []
    installer, indexes = found
    packages: list[tuple[str, bool]] = []
    skip = False
    for i in indexes:
        text, redirected = words[i]
        if skip:
            skip = False
            continue
        if "$" in text or "`" in text:
            continue  # a package list the shell expands: not known here
        if text.startswith("-"):
            skip = text in _INSTALL_VALUE_OPTIONS
            if text in ("-r", "--requirement", "-e", "--editable"):
                return []  # packages from a file or a source tree: their pins are not in these files
            continue
        packages.append((text, redirected))
    issues = []
    for text, redirected in packages:
        if redirected:
            kept = re.split(r"[<>]", text, maxsplit=1)[0]
            issues.append(
                HygieneIssue(
                    check="install-pin-redirected",
                    text=f"`{clip(text, 60)}` is unquoted: the shell takes what follows {kept!r} as a redirection "
                    f"(`>=…` writes pip's output to a file named after the version, `<…` reads one), so the version "
                    f"bound is lost and {kept} installs at whatever release the index holds",
                    location=location,
                )
            )
    loose = [t for t, redirected in packages if redirected or not _pinned(t, installer)]
    if loose:
        vllm = any(_package_name(t) == "vllm" for t in loose)
        shown = ", ".join(clip(re.split(r"[<>]", t, maxsplit=1)[0] if r else t, 40) for t, r in packages if t in loose)
        issues.append(
            HygieneIssue(
                check="install-at-start",
                text=f"{'pip install' if installer == 'pip' else 'the package manager installs'} {shown}: unpinned "
                "(no exact version), run each time the container starts"
                + ("; vLLM itself is then whatever release the index holds at that start" if vllm else "")
                + (
                    "; a URL on a branch installs whatever was last pushed there"
                    if any("://" in t for t in loose)
                    else ""
                ),
                location=location,
            )
        )
    return issues


# A process name that every Python program has: a kill by it ends the user's other Python processes too.
_ANY_PYTHON = re.compile(r"python[\d.]*")


def kill_issue(words: list[str], previous: list[str], location: Location) -> HygieneIssue | None:
    """`pkill python`, `pkill -f python`, `killall python3`, `pgrep python | xargs kill`: a kill by a name that
    matches every Python process of the user on the host, not only the servers the script started."""
    bases = [w.rsplit("/", 1)[-1] for w in words]
    if bases[:1] in (["pkill"], ["killall"]):
        named = [w for w in words[1:] if not w.startswith("-") and not w.isdigit()]
    elif bases[:1] == ["xargs"] and "kill" in bases and previous[:1] == ["pgrep"]:
        named = [w for w in previous[1:] if not w.startswith("-")]
    else:
        return None
    if not named or not _ANY_PYTHON.fullmatch(named[-1]):
        return None
    shown = " ".join(([*previous, "|"] if bases[0] == "xargs" else []) + words)
    return HygieneIssue(
        check="kills-by-name",
        text=f"`{clip(shown, 80)}` kills every process of the user on this host that matches {named[-1]!r}, not "
        "only the servers this script started: other jobs, notebooks and agents in Python end with them",
        location=location,
    )


_SUBSTITUTED_NAME = re.compile(r"^\$\(([A-Z_][A-Z0-9_]*)\)$")


def substituted_variable_issue(expansion: str, assigned: set[str], location: Location) -> HygieneIssue | None:
    """`$(PORT)` in a shell script whose PORT is a variable it sets: command substitution, which runs a command
    named PORT (not found: empty output), not the variable's value `${PORT}` (Kubernetes' $(VAR) in a
    manifest's args is another matter: only shell files are checked)."""
    found = _SUBSTITUTED_NAME.match(expansion)
    if found is None or found[1] not in assigned:
        return None
    name = found[1]
    return HygieneIssue(
        check="variable-run-as-command",
        text=f"`$({name})` runs a command named {name}, which does not exist, and expands to nothing: the variable "
        f"{name} the script sets is `${{{name}}}`",
        location=location,
    )


_ANY_ADDRESS = {"0.0.0.0", "::", "[::]"}


def ray_dashboard_issue(words: list[str], location: Location, token_auth: bool = False) -> HygieneIssue | None:
    """`ray start --head --dashboard-host 0.0.0.0`: Ray's dashboard, and its job submission API, on every
    interface of the head node, unauthenticated unless token authentication is on (``token_auth``:
    RAY_AUTH_MODE=token, Ray 2.52.0+; off by default)."""
    if token_auth or "RAY_AUTH_MODE=token" in words:
        return None
    at = next(
        (i for i in range(len(words) - 1) if words[i].rsplit("/", 1)[-1] == "ray" and words[i + 1] == "start"), None
    )
    if at is None or "--head" not in words[at:]:
        return None
    rest = words[at + 2 :]
    host = next(
        (
            w.split("=", 1)[1] if "=" in w else (rest[i + 1] if i + 1 < len(rest) else "")
            for i, w in enumerate(rest)
            if w == "--dashboard-host" or w.startswith("--dashboard-host=")
        ),
        None,
    )
    if host not in _ANY_ADDRESS:
        return None
    return HygieneIssue(
        check="ray-dashboard-exposed",
        text=f"`ray start --head --dashboard-host {host}` serves Ray's dashboard and its job submission API "
        "(port 8265 unless --dashboard-port) on every interface, unauthenticated without RAY_AUTH_MODE=token: "
        "whoever reaches it can run code on the cluster, the vLLM workers' GPUs and credentials included",
        location=location,
    )


# --- Kubernetes Secrets ---


def secret_data_issues(doc: Document, secret: Located) -> list[HygieneIssue]:
    """Values of a Secret's `data` that are not base64 (the API server refuses the object: "illegal base64
    data"); a raw token or a `$VAR` kubectl does not expand belongs in `stringData`. Template values are skipped."""
    data = secret.get("data")
    if data is None or not isinstance(data.value, dict):
        return []
    issues = []
    for key, item in data.value.items():
        value = text_of(item).replace("\n", "").replace("\r", "")
        if not value or "{{" in value or re.fullmatch(r"<[^<>]+>", value):
            continue  # a template's value, or `<your-base64-token>` for the reader to fill in
        try:
            base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            issues.append(
                HygieneIssue(
                    check="secret-data-not-base64",
                    text=f"data.{key} of Secret {_name_of(secret)} is not base64 ({len(value)} characters"
                    + (", a variable kubectl does not expand" if "$" in value else "")
                    + "): the API server refuses the Secret; write the plain value under stringData",
                    location=node_location(doc, item),
                )
            )
    return issues


def _name_of(obj: Located) -> str:
    meta = obj.get("metadata")
    return text_of(meta.get("name")) if meta is not None and meta.get("name") is not None else "?"


# --- compose services that cannot start together ---


def _profiles(service: Located) -> frozenset[str]:
    item = service.get("profiles")
    listed = item is not None and isinstance(item.value, list)
    return frozenset(text_of(p) for p in item.items()) if listed else frozenset()


def _host_ports(service: Located) -> list[tuple[str, Located]]:
    """The host side of each published port ("8080:8000", "127.0.0.1:8080:8000", {published: 8080})."""
    found = []
    for item in service.each("ports"):
        if isinstance(item.value, dict):
            published = item.get("published")
            if published is not None:
                found.append((text_of(published), item))
            continue
        parts = text_of(item).split("/", 1)[0].split(":")
        if len(parts) >= 2 and parts[-2]:
            found.append((parts[-2], item))
    return found


def compose_conflicts(doc: Document, services: dict[str, Located]) -> list[HygieneIssue]:
    """Services `docker compose up` starts together (neither has profiles, or they share one) that claim one
    container name or one host port: the second container is not created, or does not start."""
    claimed: dict[tuple[str, str], tuple[str, frozenset[str]]] = {}
    issues = []
    for name, service in services.items():
        profiles = _profiles(service)
        given = service.get("container_name")
        wanted = [("container name", text_of(given), given)] if given is not None else []
        wanted += [("host port", port, item) for port, item in _host_ports(service) if "$" not in port]
        for what, value, item in wanted:
            other = claimed.get((what, value))
            if other is None:
                claimed[(what, value)] = (name, profiles)
                continue
            first, first_profiles = other
            if (profiles or first_profiles) and not profiles & first_profiles:
                continue  # started by different --profile choices
            failure = "the name is in use" if what == "container name" else "the port is already allocated"
            issues.append(
                HygieneIssue(
                    check="compose-conflict",
                    text=f"services {first} and {name} both take the {what} {value}, and `docker compose up` starts "
                    f"both: the second fails ({failure})",
                    location=node_location(doc, item),
                )
            )
    return issues


# --- Kubernetes containers -----------------------------------------------------------------------

_SHELL_REFERENCE = re.compile(r"(?<![$])\$\{?[A-Za-z_][A-Za-z0-9_]*\}?")
_K8S_REFERENCE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def container_hygiene(
    doc: Document,
    container: Located,
    defined_first: list[str] | None,
    *,
    vllm: bool,
    evaluated: frozenset[str] = frozenset(),
) -> list[HygieneIssue]:
    """A Kubernetes container's env values Kubernetes does not expand, env names listed twice, a floating
    image; for the vLLM container (``vllm``) its liveness probe too (its image is checked with the
    workload's). ``defined_first``: the variables set before its env[] (None: not known); ``evaluated``: the
    variables a shell of the pod evaluates (its references are the shell's to expand)."""
    issues = env_expansion_issues(doc, container, defined_first, evaluated) + duplicate_env_issues(doc, container)
    if vllm:
        probe = liveness_issue(doc, container)
        return issues + ([probe] if probe is not None else []) + one_miss_issues(doc, container)
    image = container.get("image")
    name = text_of(container.get("name")) if container.get("name") is not None else "?"
    found = image_issue(text_of(image), node_location(doc, image), f"container {name}: ") if image is not None else None
    return issues + ([found] if found is not None else [])


def env_expansion_issues(
    doc: Document, container: Located, defined_first: list[str] | None, evaluated: frozenset[str] = frozenset()
) -> list[HygieneIssue]:
    """env[].value text Kubernetes passes as written: ``$VAR`` and ``${VAR}`` (it expands only ``$(VAR)``),
    and ``$(VAR)`` of a variable not defined earlier in the container's env (when ``defined_first`` is known)."""
    issues = []
    defined = set(defined_first or ())
    for item in container.each("env"):
        name = text_of(item.get("name")) if item.get("name") is not None else ""
        value_item = item.get("value")
        if value_item is not None and isinstance(value_item.value, str) and name not in evaluated:
            value = without_actions(value_item.value)  # `{{ $val }}`: a Helm variable, rendered away
            without = _K8S_REFERENCE.sub("", value)
            shell_style = [m.group() for m in _SHELL_REFERENCE.finditer(without)]
            certain = defined_first is not None
            undefined = [m[1] for m in _K8S_REFERENCE.finditer(value) if certain and m[1] and m[1] not in defined]
            if shell_style:
                issues.append(
                    HygieneIssue(
                        check="env-not-expanded",
                        text=f"{name}: {clip(', '.join(dict.fromkeys(shell_style)), 60)} stays as written (Kubernetes "
                        "expands only $(VAR), of variables defined earlier in the container's env)",
                        location=node_location(doc, value_item),
                    )
                )
            if undefined:
                issues.append(
                    HygieneIssue(
                        check="env-not-expanded",
                        text=f"{name}: $({clip(', '.join(dict.fromkeys(undefined)), 60)}) names no variable defined "
                        "earlier in the container's env, so Kubernetes passes it as written",
                        location=node_location(doc, value_item),
                    )
                )
        if name:
            defined.add(name)
    return issues


def duplicate_env_issues(doc: Document, container: Located) -> list[HygieneIssue]:
    """An env name listed twice in one container: the kubelet keeps the later value."""
    first: dict[str, Located] = {}
    issues = []
    for item in container.each("env"):
        name = text_of(item.get("name")) if item.get("name") is not None else ""
        if not name:
            continue
        if name in first:
            issues.append(
                HygieneIssue(
                    check="duplicate-key",
                    text=f"env {name} is listed twice in the container (first at line {first[name].line}): the API "
                    "server warns that it hides the earlier one, the kubelet sets the later value, and a kubectl "
                    "apply that later removes one copy drops the variable altogether",
                    location=node_location(doc, item),
                )
            )
        first[name] = item
    return issues


# How long vLLM may take before it answers a probe: an 8B model read from a local disk takes one to three
# minutes with torch.compile and CUDA graph capture, a larger one or a first download longer; four
# minutes is the least we take a liveness probe without a startup probe to leave it.
MIN_START_SECONDS = 240


def _seconds(probe: Located, key: str, default: int) -> int | None:
    item = probe.get(key)
    if item is None:
        return default
    value = item.value
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def one_miss_issues(doc: Document, container: Located) -> list[HygieneIssue]:
    """A readiness or liveness probe that acts on a single failed check (failureThreshold 1): one answer slower
    than its timeoutSeconds (default 1 s) takes the pod out of its Services, or restarts the container."""
    found = []
    for name, effect in (("readinessProbe", "takes the pod out of its Services"), ("livenessProbe", "restarts it")):
        probe = container.get(name)
        if probe is None or not isinstance(probe.value, dict) or _seconds(probe, "failureThreshold", 3) != 1:
            continue
        timeout = _seconds(probe, "timeoutSeconds", 1)
        found.append(
            HygieneIssue(
                check="probe-fails-on-one-miss",
                text=f"the {name} {effect} after one failed check (failureThreshold 1, timeoutSeconds {timeout}): "
                "a single /health answer slower than that under load, or one lost packet, is enough",
                location=node_location(doc, probe.get("failureThreshold")),
            )
        )
    return found


def liveness_issue(doc: Document, container: Located) -> HygieneIssue | None:
    """A livenessProbe with no startupProbe whose budget (initialDelaySeconds + failureThreshold ×
    periodSeconds, Kubernetes' defaults 0, 3 and 10) is shorter than a model takes to load."""
    probe = container.get("livenessProbe")
    if probe is None or not isinstance(probe.value, dict) or container.get("startupProbe") is not None:
        return None
    delay = _seconds(probe, "initialDelaySeconds", 0)
    threshold = _seconds(probe, "failureThreshold", 3)
    period = _seconds(probe, "periodSeconds", 10)
    if delay is None or threshold is None or period is None:
        return None  # a value the files fill in elsewhere (a template)
    budget = delay + threshold * period
    if budget >= MIN_START_SECONDS:
        return None
    return HygieneIssue(
        check="liveness-kills-model-load",
        text=f"the livenessProbe gives the server {budget} s ({delay} + {threshold} × {period}) and there is no "
        f"startupProbe: a model that takes longer to load (we take {MIN_START_SECONDS} s as the least to allow) is "
        "killed and restarted before it serves",
        location=node_location(doc, probe),
    )


def pod_claims(doc: Document, pod_spec: Located) -> list[ClaimUse]:
    uses = []
    for volume in pod_spec.each("volumes"):
        claim = volume.get("persistentVolumeClaim")
        name = claim.get("claimName") if claim is not None else None
        if name is not None and isinstance(name.value, str):
            uses.append(ClaimUse(claim=name.value, location=node_location(doc, name)))
    return uses


def claim_spec(doc: Document, obj: Located) -> ClaimSpec | None:
    """A PersistentVolumeClaim object with its access modes; None for another object."""
    kind = obj.get("kind")
    meta = obj.get("metadata")
    name = meta.get("name") if meta is not None else None
    spec = obj.get("spec")
    if kind is None or text_of(kind) != "PersistentVolumeClaim" or name is None or spec is None:
        return None
    modes = spec.get("accessModes")
    return ClaimSpec(
        name=text_of(name),
        access_modes=[text_of(m) for m in modes.items()] if modes is not None else [],
        location=node_location(doc, modes or obj),
    )


def _claim_issues(workload: Workload, claims: dict[str, ClaimSpec]) -> list[HygieneIssue]:
    pods = (workload.replicas or 1) * max(workload.nodes, 1)
    issues = []
    for use in workload.claims:
        spec = claims.get(use.claim)
        if spec is None or pods < 2 or not spec.access_modes:
            continue
        if not set(spec.access_modes) <= {"ReadWriteOnce", "ReadWriteOncePod"}:
            continue
        issues.append(
            HygieneIssue(
                check="rwo-claim-shared",
                text=f"{pods} pods mount the claim {use.claim}, whose access modes ({', '.join(spec.access_modes)}, "
                f"{spec.location}) let only one node attach it: pods scheduled on another node stay ContainerCreating",
                location=use.location,
            )
        )
    return issues


def duplicate_key_issues(file: str, duplicates: list[DuplicateKey]) -> list[HygieneIssue]:
    issues = {}
    for dup in duplicates:
        where = f"{dup.path}." if dup.path else ""
        issues[(dup.key, dup.again)] = HygieneIssue(
            check="duplicate-key",
            text=f"{where}{clip(dup.key, 60)} is written twice in one mapping (first at line {dup.first}): a YAML "
            "loader keeps the later silently, and kubectl's and kustomize's strict decoding refuses the document",
            location=Location(file=file, line=dup.again, path=f"{where}{clip(dup.key, 60)}"),
        )
    return list(issues.values())


def finish(deployment: Deployment) -> None:
    """The checks that need the whole read deployment: secrets, image tags and shared claims of each
    workload, and each file's own problems given to the workloads of that file (of every one when the
    file holds none)."""
    claims = {c.name: c for c in deployment.claims}
    files = {w.file for w in deployment.workloads}
    once = {(i.check, i.location.file, i.location.line, i.text): i for i in deployment.hygiene}
    deployment.hygiene = list(once.values())  # a base that several kustomize overlays build is read once each
    for workload in deployment.workloads:
        workload.hygiene += secret_issues(workload)
        found = image_issue(workload.image, workload.image_location)
        if found is not None:
            workload.hygiene.append(found.model_copy(update={"release": True}))
        workload.hygiene += _claim_issues(workload, claims)
        workload.hygiene += [
            issue
            for issue in deployment.hygiene
            if issue.location.file == workload.file or issue.location.file not in files
        ]
    for server in deployment.cache_servers:  # an LMCache server's own; its file's, when no vLLM shares it
        server.hygiene += secret_issues(server)
        found = image_issue(server.image, server.image_location)
        if found is not None:
            server.hygiene.append(found.model_copy(update={"release": True}))
        server.hygiene += [i for i in deployment.hygiene if i.location.file == server.file not in files]
