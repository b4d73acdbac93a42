"""The LMCache release an LMCache server runs, as its image says it, and the options on its command line that
its release's parser refuses (knowledge/lmcache_server_cli.yaml: the servers' argparse options by release)."""

from __future__ import annotations

import datetime as dt
import difflib
import re
from dataclasses import dataclass

from ...knowledge import Knowledge, ServerCommandCli
from ...versions import Version, in_range
from .hygiene import floating_tag
from .images import lmcache_image_date
from .model import FlagUse, Workload

# LMCache's own images (lmcache/vllm-openai, lmcache/standalone) tag LMCache's release (v0.3.14); another
# repository's tag is its own versioning, so it names no LMCache release.
_LMCACHE_RELEASE_TAG = re.compile(r"(^|/)lmcache/[\w.-]+:v?(?P<version>\d+\.\d+\.\d+(\.post\d+)?)$")
_DATED_TAG = re.compile(r"(^|/)lmcache/[\w.-]+:(?P<date>\d{4}-\d{2}-\d{2})(-[\w.]+)?$")


@dataclass(frozen=True)
class ServerRelease:
    """The LMCache release a server is judged as, and how the review knows it (said in each finding)."""

    version: Version
    basis: str
    assumed: bool
    because: str = ""

    @property
    def named(self) -> str:
        return f"LMCache {self.version}" + ("" if self.assumed else f" ({self.basis})")

    def said(self, text: str) -> str:
        """``text`` (which names the release as ``named``), with the assumption it rests on."""
        since = f", since {self.because}" if self.because else ""
        return f"{text}; LMCache {self.version} is assumed: {self.basis}{since}" if self.assumed else text


def server_release(image: str | None, knowledge: Knowledge) -> ServerRelease:
    """The release an LMCache server's image tag names; a dated nightly as the newest release published by its
    date; any other image (a moving tag, none, another repository's) as the newest release covered, assumed."""
    line = knowledge.releases["lmcache"].releases
    newest = line[-1].version
    tagged = _LMCACHE_RELEASE_TAG.search(image.strip()) if image else None
    if tagged is not None and any(r.version == Version(tagged["version"]) for r in line):
        return ServerRelease(Version(tagged["version"]), "the image tag names it", False)
    built = lmcache_image_date(image) or _dated(image)
    if built is not None:
        by_then = [r.version for r in line if r.date is not None and r.date <= built]
        if by_then:
            return ServerRelease(by_then[-1], f"the newest release by {built}, the date its tag names", True)
    why = f"{image} names no release" if image else "no image is given"
    tag = floating_tag(image) if image else None
    if tag is not None:
        why = f"{image} has the moving tag :{tag}"
    return ServerRelease(newest, "the newest release covered", True, why)


def _dated(image: str | None) -> dt.date | None:
    m = _DATED_TAG.search(image.strip()) if image else None
    try:
        return dt.date.fromisoformat(m["date"]) if m else None
    except ValueError:
        return None


def option_problem(written: str, command: ServerCommandCli, version: Version, renamed: dict[str, str]) -> str | None:
    """Why argparse in ``command`` of ``version`` refuses the option ``written`` (``--x=1``: its ``--x``), with
    the release that removed it and the option to use instead (``renamed``: what the knowledge says replaced an
    option, else the closest spelling it accepts); None when it accepts it (also as a unique prefix, with
    allow_abbrev on, as argparse reads it)."""
    option = written.split("=", 1)[0]
    accepted = command.accepted(version)
    if option in accepted:
        return None
    prefixed = sorted(o for o in accepted if o.startswith(option)) if option.startswith("--") else []
    if command.allow_abbrev and len(prefixed) == 1:
        return None
    if command.allow_abbrev and prefixed:
        return f"{option} is ambiguous (it could be {', '.join(prefixed[:4])}): argparse stops with exit code 2"
    gone = [o.removed for o in command.options if o.flag == option and o.removed is not None and o.removed <= version]
    when = f" (removed in {max(gone)})" if gone else ""
    instead = renamed.get(option) if renamed.get(option) in accepted else None
    close = difflib.get_close_matches(option, sorted(accepted), n=1, cutoff=0.6)
    hint = (
        f"; it is {instead} there" if instead else (f"; the closest option it accepts is {close[0]}" if close else "")
    )
    return f'no option {option}{when}{hint}: argparse stops with "unrecognized arguments" (exit code 2)'


def _switch_given_a_value(flag: FlagUse, command: ServerCommandCli, version: Version) -> str | None:
    """A switch (store_true: it takes no value) written with one: ``--x=v`` is refused ("ignored explicit
    argument"), and ``--x v`` leaves ``v`` as a positional word, which these parsers have none of."""
    option = flag.written.split("=", 1)[0]
    accepted = command.accepted(version)
    full = option if option in accepted else next((o for o in accepted if o.startswith(option)), option)
    if accepted.get(full, True) or not isinstance(flag.value, str):
        return None
    return f"the switch {full}, which takes no value, given {flag.value!r}: argparse stops with exit code 2"


def _renamed(workload: Workload, knowledge: Knowledge, version: Version) -> dict[str, str]:
    """Each buffer option of the server (ports.yaml) -> the one that sizes the same buffer in ``version``."""
    server = next((s for s in knowledge.servers if s.id == workload.server), None)
    flags = server.buffer_flags if server is not None else ()
    current = next((f.flag for f in flags if in_range(f.versions, version)), None)
    return {f.flag: current for f in flags if current is not None and f.flag != current}


def refused_options(workload: Workload, knowledge: Knowledge) -> list[tuple[FlagUse, str]]:
    """Each option on an LMCache server's command line its release's parser refuses, with why (and the release)."""
    if workload.command is None:
        return []
    release = server_release(workload.image, knowledge)
    command = knowledge.lmcache_server_cli.command(workload.command, release.version)
    if command is None or command.parser != "argparse":
        return []
    renamed = _renamed(workload, knowledge, release.version)
    found = []
    for flag in workload.flags:
        if not flag.written.startswith("-"):  # a positional host or port, recorded under its option's name
            continue
        problem = option_problem(flag.written, command, release.version, renamed) or _switch_given_a_value(
            flag, command, release.version
        )
        if problem is not None:
            found.append((flag, release.said(f"`{command.command}` of {release.named} has {problem}")))
    return found
