"""The steps of CONTRIBUTING.md that are easy to forget, each checked; a failure names its step.

Steps already checked elsewhere are not repeated here (CONTRIBUTING.md names those tests): a rule's
examples (test_review.py), a tool's minimal call (test_mcp_end_to_end.py) and eval question
(test_eval.py), its SKILL.md row and the plugin's copy (test_integration_paths.py), the one-recipe-a-
backend and one-proxy-a-release rules (the loader itself).
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import typing
from functools import cache

import pytest
import yaml

from conftest import REPO
from vllm_caching_mcp.advice.render import _Planner
from vllm_caching_mcp.knowledge import Backend, Knowledge
from vllm_caching_mcp.tools import _MODULES, TOOL_NAMES

CONTRIBUTING = REPO / "CONTRIBUTING.md"
BACKENDS: tuple[str, ...] = typing.get_args(Backend)

# What each check below stands for: the section and number of its step, and a file the step names.
STEPS = {
    "inventory": ("Adding a release", 3, "knowledge/cli_inventory.yaml"),
    "verification": ("Adding a release", 5, "knowledge/verification.yaml"),
    "release range": ("Adding a release", 7, "README.md"),
    "engine records": ("Adding a release", 8, "scripts/engine_oracle/rebuild.py"),
    "recipe": ("Adding a backend", 2, "knowledge/recipes.yaml"),
    "planner": ("Adding a backend", 4, "server/vllm_caching_mcp/advice/render.py"),
    "backend tests": ("Adding a backend", 5, "tests/test_render_config.py"),
    "backend docs": ("Adding a backend", 6, "docs/tools/render_config.md"),
    "registry": ("Adding a tool", 2, "server/vllm_caching_mcp/tools.py"),
    "tool page": ("Adding a tool", 5, "docs/tools/<name>.md"),
    "readme row": ("Adding a tool", 6, "README.md"),
}


def step(key: str) -> str:
    section, number, _ = STEPS[key]
    return f"CONTRIBUTING.md, {section}, step {number}"


def numbered_steps(section: str) -> dict[int, str]:
    """The numbered items under ``## section``, by number, each with its continuation lines."""
    text = CONTRIBUTING.read_text(encoding="utf-8")
    body = text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    return {int(m.group(1)): m.group(2) for m in re.finditer(r"^(\d+)\. (.*?)(?=^\d+\. |\Z)", body, re.M | re.S)}


def test_each_step_these_checks_name_is_in_contributing() -> None:
    for key, (section, number, path) in STEPS.items():
        items = numbered_steps(section)
        assert number in items, f"{key}: CONTRIBUTING.md has no step {number} under '## {section}'"
        assert f"`{path}`" in items[number], f"{key}: {step(key)} does not name `{path}`; renumbered?"


def test_the_three_line_recipes_name_files_that_exist() -> None:
    # A module the layout moves leaves the short recipes pointing nowhere; a file to add (`<shape>`)
    # names its directory. The input shape's files are named from the deployment package.
    text = CONTRIBUTING.read_text(encoding="utf-8")
    body = text.split("\n## In three lines\n", 1)[1].split("\n## ", 1)[0]
    package = "server/vllm_caching_mcp/advice/deployment"
    named = re.findall(r"`([\w./<>-]+\.(?:py|yaml|md))`", body)
    assert len(named) >= 10, named
    missing = []
    for path in named:
        candidates = [REPO / path, REPO / package / path]
        if "<" in path:
            candidates = [c.parent for c in candidates]
        if not any(c.exists() for c in candidates):
            missing.append(path)
    assert missing == [], f"CONTRIBUTING.md, In three lines, names files that are not there: {missing}"


# -- adding a release -------------------------------------------------------------------------------


def newest(knowledge: Knowledge, package: str) -> str:
    return str(knowledge.release_versions(package)[-1])


def test_the_cli_inventory_was_built_from_the_newest_release(knowledge: Knowledge) -> None:
    release = newest(knowledge, "vllm")
    built_from = sorted({s.split(":")[1] for s in knowledge.cli_inventory.sources if s.startswith("wheel:vllm==")})
    assert f"vllm=={release}" in built_from, (
        f"knowledge/cli_inventory.yaml was generated from {built_from}, but releases.yaml goes up to vLLM "
        f"{release}: regenerate it ({step('inventory')})"
    )


def test_the_verification_run_covers_the_newest_releases(knowledge: Knowledge) -> None:
    run = yaml.safe_load((REPO / "knowledge" / "verification.yaml").read_text(encoding="utf-8"))
    for package in ("vllm", "lmcache"):
        assert str(run[package]) == newest(knowledge, package), (
            f"knowledge/verification.yaml was checked against {package} {run[package]}, but releases.yaml "
            f"goes up to {newest(knowledge, package)}: run scripts/verify_knowledge.py --update "
            f"({step('verification')})"
        )


_RANGE = re.compile(r"(\d+\.\d+\.\d+(?:\.post\d+)?) – (\d+\.\d+\.\d+(?:\.post\d+)?)")


@pytest.mark.parametrize("document", ["README.md", "SKILL.md"])
def test_the_documents_state_the_release_range_of_releases_yaml(knowledge: Knowledge, document: str) -> None:
    text = " ".join((REPO / document).read_text(encoding="utf-8").split())  # a range may break across lines
    ends = {str(knowledge.release_versions(p)[0]): newest(knowledge, p) for p in ("vllm", "lmcache")}
    stated = [(lo, hi) for lo, hi in _RANGE.findall(text) if lo in ends]
    oldest_vllm = str(knowledge.release_versions("vllm")[0])
    assert any(lo == oldest_vllm for lo, _ in stated), (
        f"{document} states no vLLM release range ({step('release range')})"
    )
    for lo, hi in stated:
        assert hi == ends[lo], (
            f"{document} says {lo} – {hi}; releases.yaml goes up to {ends[lo]} ({step('release range')})"
        )


def test_the_engine_records_cover_the_newest_release(knowledge: Knowledge) -> None:
    release = newest(knowledge, "vllm")
    rebuild = (REPO / "scripts" / "engine_oracle" / "rebuild.py").read_text(encoding="utf-8")
    covered = re.search(r"^RELEASES = \(([^)]*)\)", rebuild, re.M)
    assert covered and f'"{release}"' in covered.group(1), (
        f"scripts/engine_oracle/rebuild.py's RELEASES does not name vLLM {release} ({step('engine records')})"
    )
    assert (REPO / "tests" / "data" / "engine" / f"golden-{release}.json").is_file(), (
        f"no tests/data/engine/golden-{release}.json: run scripts/engine_oracle/rebuild.py --release {release} "
        f"({step('engine records')})"
    )


# -- adding a backend -------------------------------------------------------------------------------


def test_every_backend_has_a_recipe(knowledge: Knowledge) -> None:
    with_recipe = {r.backend for r in knowledge.recipes.recipes}
    missing = [b for b in BACKENDS if b not in with_recipe]
    assert missing == [], f"backends without a recipe in knowledge/recipes.yaml: {missing} ({step('recipe')})"


def test_every_backend_can_be_rendered() -> None:
    missing = [b for b in BACKENDS if not callable(getattr(_Planner, f"_{b}", None))]
    assert missing == [], f"render.py's _Planner has no method for {missing} ({step('planner')})"


@pytest.mark.parametrize("test_file", ["test_choose_backend.py", "test_render_config.py"])
def test_every_backend_is_chosen_and_rendered_in_the_tests(test_file: str) -> None:
    text = (REPO / "tests" / test_file).read_text(encoding="utf-8")
    missing = [b for b in BACKENDS if f'"{b}"' not in text]
    assert missing == [], f"tests/{test_file} never names backend {missing} ({step('backend tests')})"


def test_every_backend_is_on_the_render_config_page() -> None:
    text = (REPO / "docs" / "tools" / "render_config.md").read_text(encoding="utf-8")
    missing = [b for b in BACKENDS if f"`{b}`" not in text]
    assert missing == [], f"docs/tools/render_config.md does not list backend {missing} ({step('backend docs')})"


# -- adding a tool ----------------------------------------------------------------------------------


def test_every_tool_module_is_in_the_registry() -> None:
    advice = REPO / "server" / "vllm_caching_mcp" / "advice"
    with_spec = {p.stem for p in advice.glob("*.py") if re.search(r"^SPEC = ToolSpec\(", p.read_text(), re.M)}
    missing = sorted(with_spec - set(_MODULES.values()))
    assert missing == [], (
        f"advice modules with a SPEC that tools._MODULES does not name: {missing} ({step('registry')})"
    )


@pytest.mark.parametrize("name", TOOL_NAMES)
def test_every_tool_has_a_page_with_an_example(name: str) -> None:
    page = REPO / "docs" / "tools" / f"{name}.md"
    assert page.is_file(), f"{name} has no page docs/tools/{name}.md ({step('tool page')})"
    text = page.read_text(encoding="utf-8")
    assert text.startswith(f"# {name}\n") and "## Example" in text, (
        f"docs/tools/{name}.md needs a '# {name}' title and an '## Example' section ({step('tool page')})"
    )


def test_every_tool_has_a_row_in_the_readme_table() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    table = readme.split("\n## Tools\n", 1)[1].lstrip("\n").split("\n\n", 1)[0]
    rows = {m.group(1) for m in re.finditer(r"^\| `(\w+)` \|", table, re.M)}
    missing = [name for name in TOOL_NAMES if name not in rows]
    assert missing == [], f"README.md's table under '## Tools' has no row for {missing} ({step('readme row')})"


# -- the commands CONTRIBUTING.md shows --------------------------------------------------------------


def shown_commands() -> list[list[str]]:
    """Each command of CONTRIBUTING.md's ```bash blocks, split like a shell; `a && b` is two."""
    text = CONTRIBUTING.read_text(encoding="utf-8")
    lines = [line for block in re.findall(r"```bash\n(.*?)```", text, re.S) for line in block.splitlines()]
    return [shlex.split(part) for line in lines if line.strip() for part in line.split(" && ")]


@cache
def options_of(script: str) -> str:
    out = subprocess.run([sys.executable, script, "--help"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def check_command(argv: list[str]) -> None:
    """Run what can run here; for a script that needs the network or extracted wheels, check that it
    exists and takes every option shown."""
    if argv[:3] == ["python", "-m", "pip"]:
        return  # the README's setup command: tests/test_install.py keeps this one equal to it
    if argv[:3] == ["python", "-m", "pytest"]:
        missing = [a for a in argv if a.startswith("tests/") and not (REPO / a.split("::")[0]).is_file()]
        assert missing == [], f"{shlex.join(argv)}: no such test file {missing}"
        return
    if argv[0] == "python" and argv[1].startswith("scripts/"):
        assert (REPO / argv[1]).is_file(), f"{shlex.join(argv)}: {argv[1]} does not exist"
        known = set(re.findall(r"--[a-z][a-z-]*", options_of(argv[1])))
        unknown = [a for a in argv[2:] if a.startswith("--") and a not in known]
        assert unknown == [], f"{shlex.join(argv)}: {argv[1]} takes no option {unknown}"
        return
    if argv[:2] == ["python", "tests/test_engine_golden.py"]:
        # Shown with --write (it rewrites knowledge/ENGINE_AGREEMENT.md): run without it, which prints the
        # report, and it must print what is committed.
        assert set(argv[2:]) <= {"--write"}, f"{shlex.join(argv)}: the script takes --write or --compare FILE"
        out = subprocess.run([sys.executable, REPO / argv[1]], capture_output=True, text=True, timeout=300, cwd=REPO)
        assert out.returncode == 0, f"{shlex.join(argv)} exited {out.returncode}: {out.stderr[-2000:]}"
        assert out.stdout == (REPO / "knowledge" / "ENGINE_AGREEMENT.md").read_text(), (
            f"{shlex.join(argv)} would change knowledge/ENGINE_AGREEMENT.md"
        )
        return
    if argv[0] == "vllm-caching":
        out = subprocess.run(
            [sys.executable, "-m", "vllm_caching_mcp.cli", *argv[1:]], capture_output=True, text=True, timeout=120
        )
        assert out.returncode == 0, f"{shlex.join(argv)} exited {out.returncode}: {out.stderr}"
        return
    raise AssertionError(f"{shlex.join(argv)}: this test does not know how to check it; teach check_command")


def test_every_command_shown_runs_as_shown() -> None:
    commands = shown_commands()
    assert len(commands) >= 8
    for argv in commands:
        check_command(argv)
