"""scripts/check_sources.py against a small extracted-wheel tree built here, and a stand-in package
index on 127.0.0.1 serving source distributions."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import io
import json
import sys
import tarfile
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from conftest import REPO
from standin_http import serve, stop_server

SCRIPT = REPO / "scripts" / "check_sources.py"


def _script() -> ModuleType:
    """scripts/check_sources.py as a module, so its main() runs in-process."""
    spec = importlib.util.spec_from_file_location("check_sources", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["check_sources"] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


script = _script()


def knowledge_dir(tmp_path: Path, files: dict[str, str]) -> Path:
    knowledge = tmp_path / "knowledge"
    knowledge.mkdir()
    for name, text in files.items():
        (knowledge / name).write_text(text)
    return knowledge


def check_sources(knowledge: Path, src: Path, *options: str) -> list[str]:
    """The script's output lines; it must exit 1 (something does not resolve) and write nothing to stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = script.main(["--src-dir", str(src), "--knowledge", str(knowledge), *options])
    assert code == 1 and not err.getvalue(), err.getvalue()
    return out.getvalue().splitlines()


def test_reports_missing_files_lines_and_wheels(tmp_path: Path) -> None:
    sources = (
        "settings:\n"
        "  - sources:\n"
        "      - wheel:vllm==0.33.0:vllm/config/cache.py:3\n"
        "      - wheel:vllm==0.33.0:vllm/config/cache.py:2-40\n"
        "      - wheel:vllm==0.33.0:vllm/config/gone.py\n"
        "      - wheel:vllm==0.32.0:vllm/config/cache.py\n"
    )
    knowledge = knowledge_dir(tmp_path, {"flags.yaml": sources})
    src = tmp_path / "src"
    (src / "vllm-0.33.0" / "vllm" / "config").mkdir(parents=True)
    (src / "vllm-0.33.0" / "vllm" / "config" / "cache.py").write_text("a = 1\nb = 2\nc = 3\n")
    lines = check_sources(knowledge, src)
    assert any("cache.py:40: the file has only 3 lines" in line for line in lines)
    assert any("gone.py: the wheel has no such file" in line for line in lines)
    assert any("vllm==0.32.0" in line and "no extracted wheel" in line for line in lines)
    assert lines[-1] == "4 release sources checked, 3 do not resolve"


def _sdist(version: str, files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"vllm-{version}/{name}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@pytest.fixture
def index() -> Iterator[str]:
    """A PEP 691 simple index: a good vllm sdist, one listed under a wrong sha256, one that reaches out of its tree."""
    proxy_py = "".join(f"line {n}\n" for n in range(1, 301))
    good = _sdist("0.21.0", {"examples/disaggregated/proxy.py": proxy_py, "vllm/__init__.py": ""})
    bad = _sdist("0.20.0", {"examples/proxy.py": proxy_py})
    evil = _sdist("0.22.0", {"examples/proxy.py": proxy_py, "../../escape.py": "x = 1\n"})
    files = {"vllm-0.21.0.tar.gz": good, "vllm-0.20.0.tar.gz": bad, "vllm-0.22.0.tar.gz": evil}
    hashes = {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}
    hashes["vllm-0.20.0.tar.gz"] = "0" * 64

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            if self.path == "/simple/vllm/":
                body = json.dumps(
                    {
                        "files": [
                            {"filename": n, "url": f"/files/{n}", "hashes": {"sha256": h}} for n, h in hashes.items()
                        ]
                    }
                ).encode()
                kind = "application/vnd.pypi.simple.v1+json"
            elif self.path.startswith("/files/") and self.path[7:] in files:
                body, kind = files[self.path[7:]], "application/gzip"
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = serve(Handler)
    yield f"http://127.0.0.1:{server.server_address[1]}/simple"
    stop_server(server)


def test_fetches_source_distributions_checks_their_hash_and_resolves_their_files(index: str, tmp_path: Path) -> None:
    sources = (
        "pd_proxies:\n"
        "  - sources:\n"
        "      - sdist:vllm==0.21.0:examples/disaggregated/proxy.py:147-163\n"
        "      - sdist:vllm==0.21.0:examples/disaggregated/proxy.py:301\n"
        "      - sdist:vllm==0.20.0:examples/proxy.py:10\n"
        "      - sdist:vllm==0.19.0:examples/proxy.py\n"
        "      - sdist:vllm==0.22.0:examples/proxy.py\n"
    )
    src = tmp_path / "src"
    lines = check_sources(knowledge_dir(tmp_path, {"recipes.yaml": sources}), src, "--download", "--index-url", index)
    assert lines[:3] == [
        "recipes.yaml: sdist:vllm==0.21.0:examples/disaggregated/proxy.py:301: the file has only 300 lines",
        "recipes.yaml: sdist:vllm==0.20.0:examples/proxy.py:10: could not fetch the sdist: "
        "vllm-0.20.0.tar.gz: sha256 does not match the index",
        "recipes.yaml: sdist:vllm==0.19.0:examples/proxy.py: could not fetch the sdist: "
        "the index has no vllm-0.19.0.tar.gz",
    ]
    assert lines[3].startswith("recipes.yaml: sdist:vllm==0.22.0:examples/proxy.py: could not fetch the sdist: ")
    assert "outside the destination" in lines[3] and lines[4] == "5 release sources checked, 4 do not resolve"
    # Extracted without the archive's top directory; a refused archive leaves nothing behind.
    assert (src / "vllm-0.21.0-sdist" / "examples" / "disaggregated" / "proxy.py").is_file()
    assert sorted(p.name for p in src.iterdir()) == ["vllm-0.21.0-sdist"]
    assert not (tmp_path / "escape.py").exists()


def test_checks_each_proxy_path_in_every_release_it_covers(index: str, tmp_path: Path) -> None:
    releases = (
        "lines:\n  - package: vllm\n    releases:\n"
        "      - {version: '0.20.0'}\n      - {version: '0.21.0'}\n      - {version: '0.23.0'}\n"
    )
    proxies = (
        "pd_proxies:\n"
        "  - {id: proxy.now, versions: '>=0.21.0', path: examples/disaggregated/proxy.py}\n"
        "  - {id: proxy.before, versions: '<0.21.0', path: examples/proxy.py}\n"
        "  - {id: proxy.moved, versions: '==0.21.0', path: examples/old/proxy.py}\n"
        "  - {id: proxy.also-before, versions: '==0.20.0', path: examples/proxy.py}\n"
    )
    knowledge = knowledge_dir(tmp_path, {"releases.yaml": releases, "recipes.yaml": proxies})
    options = ("--download", "--pd-proxies", "--index-url", index)
    assert check_sources(knowledge, tmp_path / "src", *options) == [
        "0 release sources checked, 0 do not resolve",
        "pd_proxies proxy.before: could not fetch the vllm 0.20.0 sdist: vllm-0.20.0.tar.gz: sha256 does not match "
        "the index",
        "pd_proxies proxy.moved: vllm 0.21.0 has no examples/old/proxy.py",
        # a release that failed once is not fetched again, and keeps its reason
        "pd_proxies proxy.also-before: could not fetch the vllm 0.20.0 sdist: vllm-0.20.0.tar.gz: sha256 does "
        "not match the index",
        "pd_proxies proxy.now: vllm 0.23.0 has no source distribution on the index",
        "2 proxy paths checked, 3 wrong, 1 not checkable",
    ]


@pytest.mark.parametrize(
    ("name", "read"),
    [
        ("docker/Dockerfile", True),  # the release's image recipe
        (".buildkite/release-pipeline.yaml", True),
        ("examples/proxy.py", True),
        ("docker/Dockerfile.cpu", False),
        ("vllm/_C.abi3.so", False),
    ],
)
def test_the_image_recipe_and_release_pipeline_are_extracted_for_their_citations(name: str, read: bool) -> None:
    assert script._is_text(name) is read
