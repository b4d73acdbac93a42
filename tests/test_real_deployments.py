"""scripts/score_real_deployments.py and scripts/fetch_real_deployments.py.

The scorer runs on a small corpus of documents written here, with expectations written here, and is
checked for what it counts as found, missed, wrong, not judged, unreadable and missing. The fetcher
runs against a stand-in raw file host on 127.0.0.1. The real corpus (third-party files, never in this
repository) is scored when VLLM_CACHING_MCP_REAL_CORPUS names the directory it was fetched into.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import unquote

import pytest
import yaml

from conftest import REPO, run_in_process
from standin_http import serve, stop_server


def _script(name: str) -> ModuleType:
    """A script of scripts/ as a module, so its main() runs in this process."""
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


score = _script("score_real_deployments")
fetch = _script("fetch_real_deployments")

# An LMCache engine whose chunk size is set under a name LMCache never reads (line 3).
MISSPELT_CHUNK_SIZE = """\
#!/bin/bash
# one engine with LMCache in front of the GPU cache
export LMCACHE_CHUNKSIZE=256
vllm serve Qwen/Qwen3-8B \\
    --port 8000 \\
    --kv-transfer-config '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}'
"""

PINNED_DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: vllm
spec:
  replicas: 1
  template:
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.20.2
          args: ["--model", "Qwen/Qwen3-8B"]
          resources:
            limits:
              nvidia.com/gpu: "1"
"""

SETTINGS_ONLY = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
data:
  greeting: hello
"""

CHUNK_SIZE_IGNORED = {"lines": [3], "keywords": ["LMCACHE_CHUNKSIZE"]}
UNSTATED = {"vllm": "unstated", "where": "no image", "covered": "unknown"}

CORPUS = {
    "shell/found.sh": MISSPELT_CHUNK_SIZE,
    "shell/wrong.sh": MISSPELT_CHUNK_SIZE,
    "shell/not-judged.sh": MISSPELT_CHUNK_SIZE,
    "k8s/pinned-deployment.yaml": PINNED_DEPLOYMENT,
    "k8s/settings-said-to-run-vllm.yaml": SETTINGS_ONLY,
    "k8s/settings.yaml": SETTINGS_ONLY,
}

EXPECTATIONS: dict[str, dict[str, Any]] = {
    "shell/found.sh": {
        "release": UNSTATED,
        "must": [{"id": "chunk-size-ignored", "severity": "warning", **CHUNK_SIZE_IGNORED}],
    },
    "shell/wrong.sh": {
        "release": UNSTATED,
        # the same keyword far from the finding's line: not about this finding
        "must": [{"id": "elsewhere", "severity": "warning", "lines": [40], "keywords": ["LMCACHE_CHUNKSIZE"]}],
        "must_not": [{"what": "chunk size called ignored", **CHUNK_SIZE_IGNORED}],
    },
    "shell/not-judged.sh": {"release": UNSTATED, "must": [], "must_not": []},
    "k8s/pinned-deployment.yaml": {"release": {"vllm": "0.20.2", "where": "line 11", "covered": True}},
    "k8s/settings-said-to-run-vllm.yaml": {"release": UNSTATED},
    "k8s/settings.yaml": {"release": {"vllm": "none"}, "expect_no_vllm": True},
    "shell/not-fetched.sh": {"release": UNSTATED, "must": [{"id": "never-seen", "lines": [1], "keywords": ["x"]}]},
}


@pytest.fixture
def corpus(tmp_path: Path) -> tuple[Path, Path]:
    """The corpus directory (every file but shell/not-fetched.sh) and its expectations file."""
    root = tmp_path / "corpus"
    for key, text in CORPUS.items():
        (root / key).parent.mkdir(parents=True, exist_ok=True)
        (root / key).write_text(text)
    expectations = tmp_path / "EXPECTATIONS.yaml"
    expectations.write_text(yaml.safe_dump({"schema": 1, "files": EXPECTATIONS}))
    return root, expectations


def scored(root: Path, expectations: Path) -> dict[str, Any]:
    ran = run_in_process(score.main, "--corpus", str(root), "--expectations", str(expectations), "--json")
    assert ran.returncode == 1, ran.stderr  # one file is missing
    assert ran.stderr.splitlines() == [f"score_real_deployments: shell/not-fetched.sh: missing from {root}, not scored"]
    data: dict[str, Any] = json.loads(ran.stdout)
    return data


def test_the_scorer_counts_found_wrong_unreadable_and_missing(corpus: tuple[Path, Path]) -> None:
    data = scored(*corpus)
    files = {f["key"]: f for f in data["files"]}
    assert files["shell/found.sh"]["found"] == ["chunk-size-ignored"]
    assert files["shell/found.sh"]["right"] == 1
    assert files["shell/wrong.sh"]["missed"] == ["elsewhere"]
    [wrong] = files["shell/wrong.sh"]["wrong"]
    assert wrong == "pitfall.lmcache-key-ignored line 3 [chunk size called ignored]"
    [unjudged] = files["shell/not-judged.sh"]["unmatched"]
    assert unjudged["finding"] == "pitfall.lmcache-key-ignored line 3" and "LMCACHE_CHUNKSIZE" in unjudged["message"]
    assert files["k8s/settings-said-to-run-vllm.yaml"]["unreadable"]
    assert not files["k8s/settings.yaml"]["unreadable"]
    assert files["k8s/settings.yaml"]["release_read"] == "no vLLM workload (right)"
    assert files["k8s/pinned-deployment.yaml"]["release_read"] == "0.20.2 (image-tag)"
    assert files["k8s/pinned-deployment.yaml"]["advisories"] > 0  # 0.20.2 has published advisories
    assert files["shell/not-fetched.sh"]["missing"]
    totals = data["totals"]
    assert {k: totals[k] for k in ("files", "missing", "expected", "found", "right", "wrong", "not_judged")} == {
        "files": 6,
        "missing": ["shell/not-fetched.sh"],
        "expected": 2,
        "found": 1,
        "right": 1,
        "wrong": 1,
        "not_judged": 1,
    }
    assert totals["unreadable"] == 1
    # the shell files assumed the newest release (right: none is stated), the pinned one read its tag
    assert (totals["release_right"], totals["release_judged"]) == (4, 4)
    assert totals["configuration_findings"] == 3
    assert data["missed_most_often"] == [{"id": "elsewhere", "files": 1}]


def test_the_scoreboard_in_markdown(corpus: tuple[Path, Path]) -> None:
    root, expectations = corpus
    ran = run_in_process(score.main, "--corpus", str(root), "--expectations", str(expectations), "--run", "a test")
    assert ran.returncode == 1
    lines = ran.stdout.splitlines()
    assert lines[0] == "# Scoreboard: the review on the real-deployment corpus"
    assert "| found (at any severity) | 1 (50%) |" in lines
    assert "| precision (right / judged) | 50% |" in lines
    assert "| unreadable files | 1 |" in lines
    assert "| shell/found.sh | unstated | 0.34.0 (assumed-newest) ✓ | 1 | chunk-size-ignored | - | - | 1 | - |" in lines
    assert (
        "| shell/wrong.sh | unstated | 0.34.0 (assumed-newest) ✓ | 1 | - | elsewhere "
        "| pitfall.lmcache-key-ignored line 3 [chunk size called ignored] | 0 | - |"
    ) in lines
    assert "| shell/not-fetched.sh | unstated | missing | 1 | - | - | - | - | missing |" in lines
    assert "| k8s/settings.yaml | none | no vLLM workload (right) | 0 | - | - | - | 0 | - |" in lines
    assert any(line.startswith("| k8s/settings-said-to-run-vllm.yaml | exit 2: documents: no vLLM") for line in lines)
    unjudged = "| shell/not-judged.sh | pitfall.lmcache-key-ignored line 3 | warning |"
    assert any(line.startswith(unjudged) for line in lines)


def test_the_scorer_refuses_a_broken_expectations_file(tmp_path: Path) -> None:
    broken = tmp_path / "EXPECTATIONS.yaml"
    broken.write_text("files: [a, b]\n")
    ran = run_in_process(score.main, "--corpus", str(tmp_path), "--expectations", str(broken))
    assert ran.returncode == 2 and not ran.stdout
    assert ran.stderr.strip() == f"score_real_deployments: {broken}: files: must map each key to its expectations"


# -- the fetcher -------------------------------------------------------------------------------

# Bytes a fetch must keep as they are: no newline at the end, a tab, a trailing space, UTF-8.
RAW_FILES = {
    "/owner/repo/0123abcd/deploy/vllm.yaml": b"kind: Deployment\n\tname: x \nemoji: \xf0\x9f\x9a\xa7",
    "/other/repo/89ef/run serve.sh": b"#!/bin/bash\nvllm serve m\n",
}


class RawHost(BaseHTTPRequestHandler):
    """raw.githubusercontent.com's shape: /{owner}/{repo}/{commit}/{path}, 404 for anything else."""

    def do_GET(self) -> None:
        if self.path.startswith("/slow/"):
            time.sleep(1.0)  # past the test's --timeout: the answer comes too late
        body = RAW_FILES.get(unquote(self.path))
        self.send_response(200 if body is not None else 404)
        payload = body if body is not None else b"404: Not Found"
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def raw_host() -> Iterator[str]:
    server = serve(RawHost)
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        stop_server(server)


def test_the_fetcher_writes_each_file_byte_for_byte_and_reports_a_404(tmp_path: Path, raw_host: str) -> None:
    sources = {
        "a/vllm.yaml": {"repository": "owner/repo", "path": "deploy/vllm.yaml", "commit": "0123abcd"},
        "b/gone.yaml": {"repository": "owner/repo", "path": "deploy/gone.yaml", "commit": "0123abcd"},
        "c/run.sh": {"repository": "other/repo", "path": "run serve.sh", "commit": "89ef"},
    }
    expectations = tmp_path / "EXPECTATIONS.yaml"
    expectations.write_text(yaml.safe_dump({"files": {key: {"source": s} for key, s in sources.items()}}))
    corpus = tmp_path / "corpus"
    ran = run_in_process(
        fetch.main, "--corpus", str(corpus), "--expectations", str(expectations), "--base-url", raw_host
    )
    assert ran.returncode == 1
    assert ran.stderr.splitlines() == [
        f"fetch_real_deployments: b/gone.yaml: HTTP 404 from {raw_host}/owner/repo/0123abcd/deploy/gone.yaml"
    ]
    assert ran.stdout == f"fetched 2 of 3 files into {corpus}\n"
    assert (corpus / "a/vllm.yaml").read_bytes() == RAW_FILES["/owner/repo/0123abcd/deploy/vllm.yaml"]
    assert (corpus / "c/run.sh").read_bytes() == RAW_FILES["/other/repo/89ef/run serve.sh"]
    assert not (corpus / "b/gone.yaml").exists()


def test_the_fetcher_reports_a_host_that_does_not_answer(tmp_path: Path) -> None:
    expectations = tmp_path / "EXPECTATIONS.yaml"
    source = {"repository": "owner/repo", "path": "x.yaml", "commit": "abc"}
    expectations.write_text(yaml.safe_dump({"files": {"x.yaml": {"source": source}}}))
    ran = run_in_process(
        fetch.main,
        "--corpus",
        str(tmp_path / "c"),
        "--expectations",
        str(expectations),
        "--base-url",
        "http://127.0.0.1:9",
    )
    assert ran.returncode == 1
    [line] = ran.stderr.splitlines()
    assert line.startswith("fetch_real_deployments: x.yaml: http://127.0.0.1:9/owner/repo/abc/x.yaml: ConnectError")


def test_the_fetcher_gives_up_on_a_slow_host_and_says_after_how_long(tmp_path: Path, raw_host: str) -> None:
    expectations = tmp_path / "EXPECTATIONS.yaml"
    source = {"repository": "slow/repo", "path": "x.yaml", "commit": "abc"}
    expectations.write_text(yaml.safe_dump({"files": {"x.yaml": {"source": source}}}))
    options = ("--expectations", str(expectations), "--base-url", raw_host, "--timeout", "0.2")
    ran = run_in_process(fetch.main, "--corpus", str(tmp_path / "c"), *options)
    assert ran.returncode == 1
    url = f"{raw_host}/slow/repo/abc/x.yaml"
    assert ran.stderr == f"fetch_real_deployments: x.yaml: no answer from {url} within 0.2 s\n"


@pytest.mark.parametrize(
    ("key", "source", "field"),
    [
        ("../outside.yaml", {"repository": "o/r", "path": "p", "commit": "c"}, "files: '../outside.yaml'"),
        ("k.yaml", {"repository": "o/r", "path": "p"}, "files.k.yaml.source.commit: must be a non-empty string"),
    ],
)
def test_the_fetcher_refuses_a_key_outside_the_corpus_or_a_source_without_a_commit(
    tmp_path: Path, key: str, source: dict[str, str], field: str
) -> None:
    expectations = tmp_path / "EXPECTATIONS.yaml"
    expectations.write_text(yaml.safe_dump({"files": {key: {"source": source}}}))
    ran = run_in_process(fetch.main, "--corpus", str(tmp_path / "c"), "--expectations", str(expectations))
    assert ran.returncode == 2 and not ran.stdout
    assert ran.stderr.startswith(f"fetch_real_deployments: {expectations}: {field}")
    assert not (tmp_path / "c").exists()


# -- the real corpus ---------------------------------------------------------------------------

REAL_CORPUS = os.environ.get("VLLM_CACHING_MCP_REAL_CORPUS", "")


@pytest.mark.skipif(
    not REAL_CORPUS or not Path(REAL_CORPUS).is_dir(),
    reason=f"VLLM_CACHING_MCP_REAL_CORPUS ({REAL_CORPUS or 'unset'}) does not name a directory holding the "
    "real-deployment corpus (fetch it with scripts/fetch_real_deployments.py --corpus DIR)",
)
def test_the_real_corpus_is_read_and_nothing_found_is_wrong() -> None:
    scores = score.score_corpus(Path(REAL_CORPUS), score.load_expectations(score.DEFAULT_EXPECTATIONS))
    assert [s.key for s in scores if s.missing] == [], "fetch the corpus again: files are missing"
    assert [f"{s.key}: {s.why_unreadable}" for s in scores if s.unreadable] == []
    assert [f"{s.key}: {w}" for s in scores for w in s.wrong] == []
