"""Every Kubernetes manifest this project ships or renders, against the Kubernetes API's own schemas.

kubernetes-validate carries the OpenAPI-derived JSON schemas of each Kubernetes release, so this
runs offline. Strict mode rejects unknown fields too: a misspelt key that the API server would
drop silently (and a pod that then runs without its probe, limit or env var) fails here.
"""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest
import yaml

from conftest import REPO
from vllm_caching_mcp.advice.render import RenderConfigRequest, render_config
from vllm_caching_mcp.knowledge import Knowledge

# The oldest and the newest release whose schemas the validator carries.
KUBERNETES = ("1.32.0", "1.37.0")

BACKENDS: dict[str, dict[str, Any]] = {
    "native_cpu": {"sizes": {"kv_offloading_size_gib": 64}},
    "native_tiering": {"sizes": {"kv_offloading_size_gib": 64}, "tiers": ["fs", "p2p"], "paths": {"disk": ["/mnt/kv"]}},
    "lmcache": {"sizes": {"kv_offloading_size_gib": 64}},
    "lmcache_p2p": {"sizes": {"kv_offloading_size_gib": 64}},
    "lmcache_mp": {"sizes": {"kv_offloading_size_gib": 64}},
    "nixl_pd": {"fabric": "infiniband"},
    "mooncake_pd": {"fabric": "roce"},
    "multi_nixl_offload": {"sizes": {"kv_offloading_size_gib": 64}},
}


def check(documents: list[dict[str, Any]]) -> None:
    assert documents
    for version in KUBERNETES:
        for document in documents:
            kubernetes_validate.validate(document, version, strict=True)


def test_the_servers_own_manifest_is_valid() -> None:
    check([d for d in yaml.safe_load_all((REPO / "deploy" / "kubernetes.yaml").read_text(encoding="utf-8")) if d])


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_every_rendered_backend_is_valid(knowledge: Knowledge, backend: str) -> None:
    request = {"backend": backend, "model": "Qwen/Qwen3-8B", "version": "0.33.0", "format": "kubernetes"}
    result = render_config(RenderConfigRequest.model_validate({**request, **BACKENDS[backend]}), knowledge)
    kinds = set()
    for file in result.files:
        documents = [d for d in yaml.safe_load_all(file.content) if d]
        kinds |= {d["kind"] for d in documents}
        check(documents)
    assert kinds & {"Deployment", "DaemonSet"}


def test_an_invalid_manifest_is_caught() -> None:
    # The check must be able to fail: a misspelt field, as strict mode sees it.
    manifest = next(d for d in yaml.safe_load_all((REPO / "deploy" / "kubernetes.yaml").read_text()) if d)
    manifest["spec"]["template"]["spec"]["containers"][0]["livenesProbe"] = {"httpGet": {"port": 8000}}
    with pytest.raises(kubernetes_validate.ValidationError, match="livenesProbe"):
        kubernetes_validate.validate(manifest, KUBERNETES[0], strict=True)
