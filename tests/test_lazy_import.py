"""httpx is imported on the first network call, and concurrent first calls all see the whole module."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from vllm_caching_mcp.lazy_import import lazy_import


def test_server_start_up_does_not_import_httpx_or_jinja2() -> None:
    code = (
        "import sys, vllm_caching_mcp.mcp_server as m; m.build_server(); "
        "print(sorted(n for n in ('httpx', 'jinja2') if n in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_threads_reading_a_module_during_its_slow_first_import_all_see_it_complete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The module sets DONE only after a pause: a thread that saw it half-imported would get AttributeError.
    (tmp_path / "slow_module_for_lazy_test.py").write_text("import time\ntime.sleep(0.2)\nDONE = 'yes'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "slow_module_for_lazy_test", raising=False)
    module = lazy_import("slow_module_for_lazy_test")
    assert "slow_module_for_lazy_test" not in sys.modules
    with ThreadPoolExecutor(max_workers=8) as pool:
        seen = list(pool.map(lambda _: module.DONE, range(8)))
    assert seen == ["yes"] * 8


def test_a_missing_attribute_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError):
        _ = lazy_import("json").no_such_attribute
