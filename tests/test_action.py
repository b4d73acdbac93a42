"""The GitHub Action (action.yml), run as the runner runs it, on a sample repository.

A composite action is its `run:` steps, each a bash script with `${{ … }}` expressions filled in by
the runner before it starts. The tests fill them in the same way (inputs with action.yml's defaults,
`github`, `runner` and `steps` contexts), run each step with bash in a git repository holding a base
commit and a pull-request commit, and keep each step's `$GITHUB_OUTPUT` for the steps after it. The
two `uses:` steps are not run: setup-python is the runner's business, and for upload-sarif what is
checked is that its inputs are the review's SARIF file and the category. The package itself comes
from a non-editable install of this checkout, which is what the install step makes.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from conftest import REPO

ACTION = yaml.safe_load((REPO / "action.yml").read_text(encoding="utf-8"))
DOCS = REPO / "integrations" / "github-action"
DEPLOYMENTS = REPO / "tests" / "data" / "deployments"
SARIF_SCHEMA = json.loads((REPO / "tests" / "data" / "sarif-schema-2.1.0.json").read_text(encoding="utf-8"))
_EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
_GO_TEMPLATE = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n{{- if .Values.x }}\n"


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com"}
    env |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    out = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, env=env, check=True)
    return out.stdout.strip()


def commit(repo: Path, files: dict[str, str | None], message: str) -> str:
    """Write (or, for None, delete) ``files`` and commit them; the new commit's sha."""
    for name, text in files.items():
        path = repo / name
        if text is None:
            path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


@dataclass
class SampleRepo:
    path: Path
    base: str
    head: str


@pytest.fixture
def sample_repo(tmp_path: Path) -> SampleRepo:
    """A base commit of deployment and other files, then a pull request that changes some of each."""
    repo = tmp_path / "sample"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    base = commit(
        repo,
        {
            "README.md": "# sample\n",
            "deploy/serve.sh": (DEPLOYMENTS / "serve-llama70b-h100.sh").read_text(),
            "deploy/old.sh": (DEPLOYMENTS / "serve-llama70b-h100.sh").read_text(),
            "deploy/k8s.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: placeholder\n",
            "chart/templates/cm.yaml": "kind: ConfigMap\n",
            ".github/workflows/ci.yml": "on: [push]\njobs: {}\n",
        },
        "base",
    )
    head = commit(
        repo,
        {
            "README.md": "# sample, changed\n",  # not a deployment file
            "deploy/k8s.yaml": (DEPLOYMENTS / "k8s-nixl-pd.yaml").read_text(),  # has error findings
            "deploy/tier two.sh": (DEPLOYMENTS / "serve-llama70b-h100.sh").read_text(),  # a space in the name
            "deploy/old.sh": None,  # deleted: nothing to review
            "chart/templates/cm.yaml": _GO_TEMPLATE,  # a Go template, not YAML
            ".github/workflows/ci.yml": "on: [push, pull_request]\njobs: {}\n",
        },
        "pull request",
    )
    return SampleRepo(repo, base, head)


@dataclass
class Run:
    """What the job did: each step's outputs, the upload step's inputs, and how it ended."""

    outputs: dict[str, dict[str, str]] = field(default_factory=dict)
    upload: dict[str, str] | None = None
    status: int = 0
    log: str = ""
    summary: str = ""  # what the steps wrote to $GITHUB_STEP_SUMMARY

    def action_output(self, name: str) -> str:
        return evaluate(ACTION["outputs"][name]["value"], {"steps": self.step_contexts()})

    def step_contexts(self) -> dict[str, Any]:
        return {step: {"outputs": values} for step, values in self.outputs.items()}


def lookup(context: dict[str, Any], dotted: str) -> Any:
    value: Any = context
    for part in dotted.split("."):
        value = value.get(part, "") if isinstance(value, dict) else ""
    return value


def evaluate(text: str, context: dict[str, Any]) -> str:
    """Fill in the `${{ … }}` expressions action.yml uses: a context path, `a || b`, `a == 'b'`."""

    def one(expression: str) -> str:
        if " == " in expression:
            left, right = (side.strip() for side in expression.split(" == ", 1))
            return "true" if str(lookup(context, left)) == right.strip("'") else "false"
        for alternative in expression.split("||"):
            value = lookup(context, alternative.strip())
            if value:
                return str(value)
        return ""

    return _EXPRESSION.sub(lambda m: one(m.group(1)), text)


def run_action(repo: Path, bin_dir: Path, runner_temp: Path, **given: str) -> Run:
    """The action's steps in order, as a job would run them; stops at the first step that fails."""
    unknown = set(given) - set(ACTION["inputs"])
    assert not unknown, f"action.yml has no inputs {unknown}"
    context: dict[str, Any] = {
        "github": {"action_path": str(REPO), "event": {"pull_request": {"base": {"sha": ""}}}},
        "runner": {"temp": str(runner_temp)},
    }
    context["inputs"] = {name: evaluate(spec.get("default", ""), context) for name, spec in ACTION["inputs"].items()}
    context["inputs"].update(given)
    run = Run()
    path = f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin"
    for step in ACTION["runs"]["steps"]:
        context["steps"] = run.step_contexts()
        if "if" in step and evaluate(step["if"], context) != "true":
            continue
        if "uses" in step:
            if step["uses"].startswith("github/codeql-action/upload-sarif@"):
                run.upload = {k: evaluate(str(v), context) for k, v in step["with"].items()}
            continue
        if "pip install" in step["run"]:
            continue  # the fresh install in bin_dir is what it makes
        output = runner_temp / f"output-{step.get('id', 'step')}"
        output.write_text("")
        summary = runner_temp / f"summary-{step.get('id', 'step')}"
        summary.write_text("")
        env = {
            "PATH": path,
            "HOME": str(runner_temp),
            "GITHUB_OUTPUT": str(output),
            "GITHUB_STEP_SUMMARY": str(summary),
        }
        env |= {k: evaluate(str(v), context) for k, v in step.get("env", {}).items()}
        # The runner's own command line for `shell: bash`.
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        run.log += done.stdout + done.stderr
        run.summary += summary.read_text(encoding="utf-8")
        if "id" in step:
            lines = output.read_text().splitlines()
            run.outputs[step["id"]] = dict(line.split("=", 1) for line in lines if "=" in line)
        if done.returncode != 0:
            run.status = done.returncode
            break
    return run


@pytest.fixture
def act(fresh_install: Path, tmp_path: Path, sample_repo: SampleRepo) -> Any:
    def go(repo: Path | None = None, **given: str) -> Run:
        temp = tmp_path / f"runner-temp-{len(list(tmp_path.glob('runner-temp-*')))}"
        temp.mkdir()
        given.setdefault("base-ref", sample_repo.base)
        return run_action(repo or sample_repo.path, fresh_install / "bin", temp, **given)

    return go


def results_of(run: Run) -> list[dict[str, Any]]:
    sarif = json.loads(Path(run.action_output("sarif-file")).read_text(encoding="utf-8"))
    jsonschema.validate(sarif, SARIF_SCHEMA)
    results: list[dict[str, Any]] = sarif["runs"][0]["results"]
    return results


def uris(results: list[dict[str, Any]]) -> set[str]:
    return {loc["physicalLocation"]["artifactLocation"]["uri"] for r in results for loc in r["locations"]}


def test_run_scripts_take_inputs_only_through_the_environment() -> None:
    # An input spliced into a script is shell code (a glob, a version); in `env:` it is only a value.
    for step in ACTION["runs"]["steps"]:
        if "run" in step:
            assert "${{" not in step["run"], step.get("name")
            assert step["shell"] == "bash"
    install = next(s for s in ACTION["runs"]["steps"] if "pip install" in s.get("run", ""))
    assert install["env"] == {"ACTION_PATH": "${{ github.action_path }}"} and '"$ACTION_PATH"' in install["run"]
    setup = ACTION["runs"]["steps"][0]
    assert setup["uses"].startswith("actions/setup-python@") and setup["with"]["python-version"]
    assert ACTION["inputs"]["python-version"]["default"] == "3.12"
    assert {"paths", "fail-on", "version", "sarif-file", "upload", "category"} <= set(ACTION["inputs"])
    assert {"sarif-file", "errors", "warnings", "notes", "files"} <= set(ACTION["outputs"])


def test_a_pull_request_reviews_the_deployment_files_it_changes(act: Any, sample_repo: SampleRepo) -> None:
    run = act()
    assert run.outputs["select"]["count"] == "2", run.log
    # Changed and matched: the manifest and the script with a space; not the README, the deleted
    # script, the chart template or the workflow.
    assert "  deploy/k8s.yaml\n  deploy/tier two.sh\n" in run.log
    results = results_of(run)
    assert uris(results) == {"deploy/k8s.yaml"}  # SARIF paths from the repository root, as code scanning wants
    errors = sum(r["level"] == "error" for r in results)
    assert errors >= 1
    counts = {level: run.action_output(level) for level in ("errors", "warnings", "notes")}
    assert counts == {
        "errors": str(errors),
        "warnings": str(sum(r["level"] == "warning" for r in results)),
        "notes": str(sum(r["level"] == "note" for r in results)),
    }
    # The upload step gets the SARIF the review wrote, under the category asked for; then the job fails.
    assert run.upload == {"sarif_file": run.action_output("sarif-file"), "category": "vllm-caching"}
    assert run.action_output("sarif-file") == str(sample_repo.path / "vllm-caching.sarif")
    assert run.status == 1
    assert "a finding at or above 'error'" in run.log
    # The job summary: one line with the counts, then a table per file with findings, as the SARIF has them.
    first = run.summary.splitlines()[0]
    assert first.startswith("❌ **vllm-caching review: ") and f"{errors} error" in first, run.summary
    assert "#### deploy/k8s.yaml" in run.summary and "| Severity | Rule | Line | Message | Fix |" in run.summary
    rows = [line for line in run.summary.splitlines() if line.startswith("| ") and "Severity" not in line]
    rows = [line for line in rows if not line.startswith("| ---")]
    assert len(rows) == len(results)
    assert "No findings in: deploy/tier two.sh" in run.summary


def test_fail_on_sets_the_exit_status_and_upload_false_skips_the_upload(act: Any) -> None:
    never = act(**{"fail-on": "never", "upload": "false", "sarif-file": "out/review.sarif", "category": "deploy"})
    assert never.status == 0 and never.upload is None, never.log
    assert never.action_output("sarif-file").endswith("out/review.sarif")
    assert int(never.action_output("errors")) >= 1  # found, reported, but not failing
    assert act(**{"fail-on": "warning"}).status == 1


def test_a_change_with_no_vllm_server_is_a_clean_uploaded_review(act: Any, sample_repo: SampleRepo) -> None:
    # Only a workflow file and a YAML that holds no server change: the review must not refuse them
    # (before --allow-empty it exited 2 and failed every such pull request).
    base = sample_repo.head
    commit(sample_repo.path, {"deploy/k8s.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"}, "c")
    run = act(**{"base-ref": base})
    assert run.status == 0, run.log
    assert run.outputs["select"]["count"] == "1"
    assert results_of(run) == [] and run.upload is not None
    # Nothing matched at all: still an (empty) log to upload, so code scanning sees the analysis.
    nothing = act(**{"base-ref": base, "paths": "**/*.sh"})
    assert nothing.status == 0 and nothing.outputs["select"]["count"] == "0", nothing.log
    assert results_of(nothing) == []


def test_a_shallow_checkout_fetches_the_base_and_reviews_the_same_files(
    act: Any, sample_repo: SampleRepo, tmp_path: Path
) -> None:
    # actions/checkout's default: depth 1, no base commit; the action fetches it from origin.
    shallow = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth=1", f"file://{sample_repo.path}", str(shallow))
    with pytest.raises(subprocess.CalledProcessError):
        git(shallow, "cat-file", "-e", f"{sample_repo.base}^{{commit}}")
    run = act(repo=shallow)
    assert run.outputs["select"]["count"] == "2", run.log
    assert uris(results_of(run)) == {"deploy/k8s.yaml"}


def test_no_base_reviews_every_matching_tracked_file(act: Any) -> None:
    run = act(**{"base-ref": "", "fail-on": "never"})
    assert run.outputs["select"]["count"] == "3", run.log  # serve.sh, tier two.sh, k8s.yaml


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"fail-on": "sometimes"}, "argument --fail-on: invalid choice: 'sometimes'"),
        ({"paths": "!**/*.md"}, "paths: give at least one glob to include"),
        ({"version": "latest"}, "version: 'latest' is not a release version"),
        ({"ignore-unfixed": "yes"}, "ignore-unfixed: give true or false, not 'yes'"),
    ],
)
def test_bad_inputs_fail_with_a_line_naming_them(act: Any, given: dict[str, str], message: str) -> None:
    run = act(**given)
    assert run.status == 2, run.log
    assert message in run.log and "Traceback" not in run.log


def test_the_example_workflow_uses_only_inputs_the_action_has() -> None:
    workflow = yaml.safe_load((DOCS / "vllm-caching-review.yml").read_text(encoding="utf-8"))
    assert workflow["permissions"]["security-events"] == "write"
    steps = workflow["jobs"]["review"]["steps"]
    assert steps[0]["uses"].startswith("actions/checkout@")
    (uses,) = [s for s in steps if s.get("uses", "").endswith("/vllm-caching-mcp@REF")]
    assert set(uses["with"]) <= set(ACTION["inputs"])
    assert uses["with"]["fail-on"] in ("error", "warning", "info", "never")
    readme = (DOCS / "README.md").read_text(encoding="utf-8")
    (snippet,) = re.findall(r"```yaml\n(.*?)```", readme, re.S)
    (shown,) = [s for s in yaml.safe_load(snippet)["jobs"]["review"]["steps"] if "with" in s]
    assert set(shown["with"]) <= set(ACTION["inputs"])
    for name in ACTION["inputs"]:
        assert f"| `{name}` |" in readme, f"integrations/github-action/README.md does not describe input {name}"


def test_the_commands_the_readme_shows_run_as_shown(fresh_install: Path, sample_repo: SampleRepo) -> None:
    text = (DOCS / "README.md").read_text(encoding="utf-8")
    lines = [line for block in re.findall(r"```bash\n(.*?)```", text, re.S) for line in block.splitlines()]
    assert len(lines) == 2
    repo = sample_repo.path
    env = {**os.environ, "PATH": f"{fresh_install / 'bin'}{os.pathsep}/usr/bin{os.pathsep}/bin"}
    git(repo, "checkout", "-q", "-b", "feature")
    git(repo, "branch", "-f", "main", sample_repo.base)  # the pull request's branch against its base
    for line in lines:
        assert shlex.split(line)  # one shell command line each
        done = subprocess.run(["bash", "-o", "pipefail", "-c", line], cwd=repo, env=env, capture_output=True, text=True)
        # The pull request's manifest has errors (xargs reports a command's exit 1 as 123); serve.sh has none.
        expected = 123 if "xargs" in line else 0
        assert done.returncode == expected, f"{line}\n{done.stdout}\n{done.stderr}"
    jsonschema.validate(json.loads((repo / "vllm-caching.sarif").read_text()), SARIF_SCHEMA)


def test_file_names_cannot_forge_workflow_commands(act: Any, sample_repo: SampleRepo) -> None:
    """A changed file named `x\n::error::…` or `::add-mask::…` was printed raw: a workflow command."""
    base = sample_repo.head
    forged = {"deploy/a\n::error::all clear.sh": "echo a\n", "deploy/::add-mask::secret.sh": "echo b\n"}
    commit(sample_repo.path, dict(forged), "names")
    run = act(**{"base-ref": base})
    assert run.outputs["select"]["count"] == "2", run.log
    lines = run.log.splitlines()
    stop = next(i for i, line in enumerate(lines) if line.startswith("::stop-commands::"))
    token = lines[stop].removeprefix("::stop-commands::")
    listed = lines[stop : lines.index(f"::{token}::")]  # commands resume after the listing
    assert not any(line.startswith(("::error::all clear", "::add-mask::")) for line in lines)
    assert "  deploy/a\\x0a::error::all clear.sh" in listed and "  deploy/::add-mask::secret.sh" in listed


def test_any_number_of_changed_files_is_reviewed_in_batches(act: Any, sample_repo: SampleRepo) -> None:
    """120 changed manifests: more than one review takes (50), so three batches; one SARIF run, one summary."""
    base = sample_repo.head
    manifest = (DEPLOYMENTS / "k8s-nixl-pd.yaml").read_text()
    many = {f"fleet/team-{i % 2}/svc-{i:03}.yaml": manifest for i in range(120)}  # 60 per directory
    commit(sample_repo.path, dict(many), "a fleet")
    run = act(**{"base-ref": base})
    assert run.outputs["select"]["count"] == "120", run.log
    assert "Batch 3 of 3: " in run.log and "Batch 4 of" not in run.log, run.log
    sarif = json.loads(Path(run.action_output("sarif-file")).read_text(encoding="utf-8"))
    assert len(sarif["runs"]) == 1  # code scanning takes one run per tool and category
    results = results_of(run)
    assert uris(results) == set(many)  # every batch's findings, at their files
    rules = sarif["runs"][0]["tool"]["driver"]["rules"]
    assert all(rules[r["ruleIndex"]]["id"] == r["ruleId"] for r in results)
    assert run.action_output("errors") == str(sum(r["level"] == "error" for r in results))
    assert run.status == 1 and "a finding at or above 'error'" in run.log
    first = run.summary.splitlines()[0]
    assert first.startswith("❌ **vllm-caching review of 120 files in 3 batches: "), run.summary
    assert all(f"#### {name}" in run.summary for name in many)
    assert [f"### Batch {n} of 3" in run.summary for n in (1, 2, 3)] == [True] * 3


def test_batches_keep_a_directory_together_and_stay_within_one_review() -> None:
    from vllm_caching_mcp.review_batches import batches

    paths = [f"a/{i}.yaml" for i in range(30)] + [f"b/{i}.yaml" for i in range(30)] + [f"c/{i}.yaml" for i in range(70)]
    sizes = dict.fromkeys(paths, 10)
    done = batches(paths, sizes)
    assert sorted(p for batch in done for p in batch) == sorted(paths)
    assert all(len(batch) <= 50 for batch in done)
    assert {p.split("/")[0] for p in done[0]} == {"a"}  # b did not fit beside a: it starts its own batch
    # c is bigger than any batch: it is split where the limit falls, filling b's batch first
    assert [len(b) for b in done] == [30, 50, 50] and done[1][:30] == sorted(p for p in paths if p[0] == "b")
    # The text limit too: three files of 4 MB do not go into one review of at most 5,000,000 characters.
    big = {"x/1.yaml": 4_000_000, "x/2.yaml": 4_000_000, "x/3.yaml": 900_000}
    assert batches(list(big), big) == [["x/1.yaml"], ["x/2.yaml", "x/3.yaml"]]
    assert batches([], {}) == []


def test_ignore_unfixed_leaves_advisories_no_release_fixes_out_of_the_gate(act: Any, sample_repo: SampleRepo) -> None:
    base = sample_repo.head
    commit(sample_repo.path, {"deploy/plain.sh": "vllm serve meta-llama/Llama-3.1-8B-Instruct\n"}, "plain")
    gated = act(**{"base-ref": base, "fail-on": "warning", "version": "0.33.0"})
    assert gated.status == 1 and gated.action_output("warnings") != "0", gated.log  # GHSA-98f3: no fix known
    ignored = act(**{"base-ref": base, "fail-on": "warning", "version": "0.33.0", "ignore-unfixed": "true"})
    assert ignored.status == 0, ignored.log
    assert ignored.action_output("warnings") == gated.action_output("warnings")  # still reported
    assert "passes --fail-on warning --ignore-unfixed" in ignored.summary.splitlines()[0]
