"""The pre-commit hook (.pre-commit-hooks.yaml), checked with pre-commit's own code.

pre-commit builds a `language: python` hook's environment by installing the hook repository from
the package index, which a test must not reach; so the hook is not run through `pre-commit run`.
What pre-commit would do is done with its parts instead: the manifest and the documented
`.pre-commit-config.yaml` are loaded with its schemas, the files of a sample repository are picked
with its file filter, and the hook's entry is run on them from a non-editable install of this
checkout, with the file names appended as pre-commit appends them.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from pre_commit.clientlib import load_config, load_manifest
from pre_commit.commands.run import Classifier, filter_by_include_exclude

from conftest import REPO

DEPLOYMENTS = REPO / "tests" / "data" / "deployments"
DOCS = REPO / "integrations" / "pre-commit" / "README.md"


@pytest.fixture(scope="module")
def hook() -> dict[str, Any]:
    (only,) = load_manifest(str(REPO / ".pre-commit-hooks.yaml"))  # raises on anything off-schema
    assert isinstance(only, dict)
    return only


def test_the_manifest_declares_the_review_hook(hook: dict[str, Any]) -> None:
    assert hook["id"] == "vllm-caching-review"
    assert hook["language"] == "python" and hook["pass_filenames"] is True
    assert hook["entry"] == "vllm-caching review --fail-on error --allow-empty"
    assert hook["args"] == ["--"]  # every file name after it is a file, whatever it looks like
    # The entry's command is a console script the package installs.
    assert shlex.split(hook["entry"])[0] in (REPO / "pyproject.toml").read_text()


def staged(repo: Path, files: dict[str, str]) -> list[str]:
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text, encoding="utf-8")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    out = subprocess.run(["git", "diff", "--cached", "--name-only"], cwd=repo, capture_output=True, text=True)
    return out.stdout.split()


def picked(hook: dict[str, Any], repo: Path, filenames: list[str]) -> list[str]:
    """The files pre-commit passes to the hook: its include/exclude regexes, then its type tags."""
    cwd = Path.cwd()
    os.chdir(repo)  # identify reads the files to tag them
    try:
        classifier = Classifier.from_config(filenames, "", "^$")
        matched = filter_by_include_exclude(classifier.filenames, hook["files"], hook["exclude"])
        return list(classifier.by_types(matched, hook["types"], hook["types_or"], hook["exclude_types"]))
    finally:
        os.chdir(cwd)


def run_entry(hook: dict[str, Any], repo: Path, bin_dir: Path, files: list[str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin"}
    argv = [*shlex.split(hook["entry"]), *hook["args"], *files]
    return subprocess.run(argv, cwd=repo, env=env, capture_output=True, text=True, timeout=300)


SERVE = (DEPLOYMENTS / "serve-llama70b-h100.sh").read_text(encoding="utf-8")
COMPOSE = (DEPLOYMENTS / "docker-compose.yaml").read_text(encoding="utf-8")


def test_the_hook_gets_the_deployment_shapes_and_nothing_else(hook: dict[str, Any], tmp_path: Path) -> None:
    names = staged(
        tmp_path,
        {
            "serve.sh": SERVE,
            "deploy/compose.yml": COMPOSE,
            "deploy/.env": "MODEL=x\n",
            "deploy/prod.env": "MODEL=x\n",
            "k8s/values.yaml": "replicaCount: 1\n",
            "chart/templates/deployment.yaml": "{{- if .Values.x }}\n",
            ".github/workflows/ci.yml": "on: [push]\n",
            "README.md": "# x\n",
            "main.py": "print()\n",
            "notes.yaml.bak": "x\n",
        },
    )
    assert sorted(picked(hook, tmp_path, names)) == [
        "deploy/.env",
        "deploy/compose.yml",
        "deploy/prod.env",
        "k8s/values.yaml",
        "serve.sh",
    ]


def test_the_entry_stops_a_commit_at_an_error_and_passes_a_clean_one(
    hook: dict[str, Any], fresh_install: Path, tmp_path: Path
) -> None:
    clean = tmp_path / "clean"
    clean_files = picked(hook, clean, staged(clean, {"serve.sh": SERVE, "README.md": "# x\n"}))
    done = run_entry(hook, clean, fresh_install / "bin", clean_files)
    assert done.returncode == 0, done.stdout + done.stderr
    broken = tmp_path / "broken"
    broken_files = picked(hook, broken, staged(broken, {"serve.sh": SERVE, "compose.yaml": COMPOSE}))
    done = run_entry(hook, broken, fresh_install / "bin", broken_files)
    assert done.returncode == 1, done.stdout + done.stderr
    assert re.search(r"^error +\S+ +compose\.yaml:\d+", done.stdout, re.M), done.stdout


def test_a_commit_of_yaml_without_a_vllm_server_passes(
    hook: dict[str, Any], fresh_install: Path, tmp_path: Path
) -> None:
    # A values file or manifest of something else matches `files:`; before --allow-empty the
    # review refused it (exit 2) and so stopped every such commit.
    files = picked(hook, tmp_path, staged(tmp_path, {"k8s/redis.yaml": "apiVersion: v1\nkind: Service\n"}))
    assert files == ["k8s/redis.yaml"]
    done = run_entry(hook, tmp_path, fresh_install / "bin", files)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "k8s/redis.yaml: no vLLM server found in it" in done.stdout


def test_the_documented_config_loads_and_names_the_hook(hook: dict[str, Any], tmp_path: Path) -> None:
    text = DOCS.read_text(encoding="utf-8")
    (snippet,) = re.findall(r"```yaml\n(.*?)```", text, re.S)
    config = tmp_path / ".pre-commit-config.yaml"
    config.write_text(snippet, encoding="utf-8")
    (repo,) = load_config(str(config))["repos"]  # pre-commit's schema for a project's config
    assert [h["id"] for h in repo["hooks"]] == [hook["id"]]
    commented = yaml.safe_load(re.sub(r"^(\s*)# args:", r"\1args:", snippet, flags=re.M))
    (args,) = [h["args"] for h in commented["repos"][0]["hooks"]]
    assert args == ["--version", "0.33.0", "--"]


def test_the_commands_the_readme_shows_run(hook: dict[str, Any], fresh_install: Path, tmp_path: Path) -> None:
    text = DOCS.read_text(encoding="utf-8")
    lines = [line for block in re.findall(r"```bash\n(.*?)```", text, re.S) for line in block.splitlines()]
    assert len(lines) == 2
    # `pre-commit run` builds the hook's environment from the index: checked for the hook it names.
    argv = shlex.split(lines[0])
    assert argv[:3] == ["pre-commit", "run", hook["id"]] and argv[3:] == ["--all-files"]
    # The review line runs as shown.
    repo = tmp_path / "project"
    staged(repo, {"deploy/serve.sh": SERVE})
    env = {**os.environ, "PATH": f"{fresh_install / 'bin'}{os.pathsep}/usr/bin{os.pathsep}/bin"}
    done = subprocess.run(shlex.split(lines[1]), cwd=repo, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert shlex.split(lines[1])[:-1] == [*shlex.split(hook["entry"]), *hook["args"]]


def test_a_file_named_like_an_option_is_reviewed_as_a_file(
    hook: dict[str, Any], fresh_install: Path, tmp_path: Path
) -> None:
    """A file named `--gpu=x.sh` was read as the --gpu option (exit 2 on every commit)."""
    files = staged(tmp_path, {"--gpu=x.sh": "echo nothing to serve\n", "deploy/ok.sh": "echo ready\n"})
    done = run_entry(hook, tmp_path, fresh_install / "bin", picked(hook, tmp_path, files))
    assert done.returncode == 0, done.stdout + done.stderr
