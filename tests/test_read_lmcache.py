"""LMCache config files: `LMCACHE_CONFIG_FILE` picks the one that applies to the server, whether it stands
alone or a ConfigMap holds it (issue 15).
"""

from __future__ import annotations

from reading import effective

LMCACHE_MANIFEST = """
apiVersion: v1
kind: ConfigMap
metadata: {name: lmcache}
data:
  lmcache.yaml: |
    local_cpu: true
    max_local_cpu_size: 40
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: engine}
spec:
  template:
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.20.2
        args: [Qwen/Qwen3-8B, --kv-transfer-config, '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}']
        env:
        - {name: LMCACHE_CONFIG_FILE, value: /etc/lmcache/%s}
"""


def effective_env(*documents: tuple[str, str]) -> tuple[dict[str, str | None], list[str]]:
    resolved = effective(*documents)
    return {k: v.value for k, v in resolved.env.items()}, resolved.notes


def test_lmcache_config_file_picks_the_config_that_applies_to_the_server() -> None:
    other = ("other.yaml", "local_cpu: false\nlocal_disk: file:///mnt/disk/\nmax_local_disk_size: 100\n")
    env, notes = effective_env(("engine.yaml", LMCACHE_MANIFEST % "lmcache.yaml"), other)
    assert (env["LMCACHE_LOCAL_CPU"], env["LMCACHE_MAX_LOCAL_CPU_SIZE"]) == ("true", "40")
    assert "LMCACHE_LOCAL_DISK" not in env
    assert any("reads lmcache.yaml, not other.yaml" in n for n in notes)
    env, notes = effective_env(("engine.yaml", LMCACHE_MANIFEST % "missing.yaml"), other)
    assert not {k for k in env if k.startswith("LMCACHE_") and k != "LMCACHE_CONFIG_FILE"}
    assert any("names a file that is not among the documents" in n for n in notes)
