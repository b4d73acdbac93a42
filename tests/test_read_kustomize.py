"""kustomize overlays, read before the readers: strategic-merge and JSON 6902 patches, `images:`
rewrites, one base built by several overlays, and what is not evaluated said (issue 15).
"""

from __future__ import annotations

import pytest

from reading import flags, workloads
from vllm_caching_mcp.advice.deployment import Workload

KUSTOMIZE_BASE = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: decode}
spec:
  template:
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.20.2
        command: [vllm, serve]
        args: [Qwen/Qwen3-8B, --max-num-seqs, "8"]
        env:
        - {name: PYTHONHASHSEED, value: "0"}
        - {name: VLLM_LOGGING_LEVEL, value: INFO}
      - name: metrics
        image: prom/statsd-exporter
"""


def kustomized(kustomization: str, *others: tuple[str, str]) -> tuple[list[Workload], list[str]]:
    return workloads(("deploy.yaml", KUSTOMIZE_BASE), ("kustomization.yaml", kustomization), *others)


def test_a_strategic_merge_patch_merges_containers_and_env_by_name_and_is_reviewed_once() -> None:
    patch = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: decode}
spec:
  template:
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.22.1
        args: [Qwen/Qwen3-8B, --max-num-seqs, "64", --enable-prefix-caching]
        env:
        - {name: VLLM_LOGGING_LEVEL, value: DEBUG}
        - {name: LMCACHE_LOCAL_CPU, value: "True"}
      - name: metrics
        $patch: delete
"""
    kustomization = "resources: [deploy.yaml]\npatchesStrategicMerge: [patch.yaml]\n"
    [w], notes = kustomized(kustomization, ("patch.yaml", patch))  # the patch is no server of its own
    assert (w.image, flags(w)) == (
        "vllm/vllm-openai:v0.22.1",
        {"--max-num-seqs": "64", "--enable-prefix-caching": True},
    )
    assert {e.name: e.value for e in w.env} == {
        "PYTHONHASHSEED": "0",
        "VLLM_LOGGING_LEVEL": "DEBUG",
        "LMCACHE_LOCAL_CPU": "True",
    }
    [seqs] = [f for f in w.flags if f.name == "--max-num-seqs"]
    assert (seqs.location.file, seqs.location.line) == ("patch.yaml", 11)
    assert "deploy.yaml: reviewed as kustomization.yaml builds it, with kustomization.yaml:2" in " ".join(notes)


def test_a_container_with_only_args_keeps_the_base_image_and_command_and_a_crd_merges_by_name() -> None:
    lws = """
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {name: big}
spec:
  leaderWorkerTemplate:
    size: 2
    leaderTemplate:
      spec:
        containers:
        - {name: leader, image: vllm/vllm-openai:v0.20.2, command: [vllm, serve], args: [m, --port, "8000"]}
        - {name: proxy, image: envoyproxy/envoy}
"""
    inline = (
        "resources: [lws.yaml]\npatches:\n- patch: |-\n    apiVersion: leaderworkerset.x-k8s.io/v1\n"
        "    kind: LeaderWorkerSet\n    metadata: {name: big}\n    spec:\n      leaderWorkerTemplate:\n"
        "        leaderTemplate:\n          spec:\n            containers:\n            - name: leader\n"
        "              args: [m, --pipeline-parallel-size, '2']\n"
    )
    [w], _ = workloads(("lws.yaml", lws), ("kustomization.yaml", inline))
    assert (w.image, flags(w)) == ("vllm/vllm-openai:v0.20.2", {"--pipeline-parallel-size": "2"})
    [size] = w.flags
    assert (size.location.file, size.location.line) == ("kustomization.yaml", 13)


def test_json6902_patches_and_images_rewrite_what_the_base_says() -> None:
    kustomization = """
resources: [deploy.yaml]
images:
- {name: vllm/vllm-openai, newName: registry.local/vllm/vllm-openai, newTag: v0.19.1}
patchesJson6902:
- target: {group: apps, version: v1, kind: Deployment, name: dec.*}
  path: ops.yaml
"""
    ops = """
- {op: replace, path: /spec/template/spec/containers/0/args/2, value: "128"}
- {op: add, path: /spec/template/spec/containers/0/args/-, value: --enforce-eager}
- {op: add, path: /spec/template/spec/containers/0/env/-, value: {name: TP, value: "2"}}
- {op: remove, path: /spec/template/spec/containers/0/env/0}
- {op: replace, path: /spec/template/spec/containers/0/nothing/here, value: 1}
- {op: move, from: /a, path: /b}
"""
    [w], notes = kustomized(kustomization, ("ops.yaml", ops))
    assert w.image == "registry.local/vllm/vllm-openai:v0.19.1" and w.image_location is not None
    assert (w.image_location.file, w.image_location.line) == ("kustomization.yaml", 4)
    assert flags(w) == {"--max-num-seqs": "128", "--enforce-eager": True}
    assert {e.name: e.value for e in w.env} == {"VLLM_LOGGING_LEVEL": "INFO", "TP": "2"}
    said = " ".join(notes)
    assert "replace /spec/template/spec/containers/0/nothing/here on Deployment/decode: the path is not" in said
    assert "move /b on Deployment/decode: only add, replace and remove are applied here" in said


def test_a_patch_whose_target_is_not_among_the_files_is_said_and_not_applied_elsewhere() -> None:
    patch = "kind: Deployment\nmetadata: {name: prefill}\nspec:\n  replicas: 3\n"
    missing = "resources: [deploy.yaml, service.yaml]\npatches:\n- path: patch.yaml\n- path: elsewhere.yaml\n"
    [w], notes = kustomized(missing, ("patch.yaml", patch))
    assert w.replicas is None and flags(w) == {"--max-num-seqs": "8"}
    said = " ".join(notes)
    assert (
        "kustomization.yaml:3 (patches[0]) patch.yaml: its target (Deployment/prefill) is not among the files" in said
    )
    assert "kustomization.yaml:1 (resources[1]): resource service.yaml is not among the documents" in said
    assert "kustomization.yaml:4 (patches[1]): patch elsewhere.yaml is not among the documents" in said


def test_one_base_built_by_two_overlays_is_read_once_per_overlay() -> None:
    def overlay(seqs: str) -> str:
        return (
            "resources: [../../base]\npatches:\n- target: {kind: Deployment, name: decode}\n  patch: |-\n"
            f"    - {{op: replace, path: /spec/template/spec/containers/0/args/2, value: '{seqs}'}}\n"
        )

    found, _ = workloads(
        ("base/deploy.yaml", KUSTOMIZE_BASE),
        ("base/kustomization.yaml", "resources: [deploy.yaml]\n"),
        ("overlays/a/kustomization.yaml", overlay("16")),
        ("overlays/b/kustomization.yaml", overlay("32")),
    )
    assert sorted((w.name, flags(w)["--max-num-seqs"]) for w in found) == [
        ("Deployment/decode container vllm (overlays/a/kustomization.yaml)", "16"),
        ("Deployment/decode container vllm (overlays/b/kustomization.yaml)", "32"),
    ]


def test_patches_copied_past_the_bound_are_refused_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from vllm_caching_mcp.advice.common import AdviceError
    from vllm_caching_mcp.advice.deployment import kustomize

    monkeypatch.setattr(kustomize, "MAX_PATCHED_NODES", 20)
    args = ", ".join("abcdefghijklmnopqrstu")
    patch = (
        "kind: Deployment\nmetadata: {name: decode}\n"
        f"spec: {{template: {{spec: {{containers: [{{name: vllm, args: [{args}]}}]}}}}}}\n"
    )
    with pytest.raises(AdviceError, match=r"^documents: kustomize patches copy more than 20 values"):
        kustomized("resources: [deploy.yaml]\npatches: [{path: p.yaml}]\n", ("p.yaml", patch))


def test_what_this_reader_cannot_evaluate_in_a_kustomization_is_said_not_guessed() -> None:
    kustomization = (
        "resources: deploy.yaml\n"
        "patches:\n"
        "- target: {kind: Deployment, name: '(d+)+e'}\n  patch: '[{op: remove, path: /spec}]'\n"
        "- target: {kind: Deployment, labelSelector: 'app in (a, b)'}\n  patch: '[{op: remove, path: /spec}]'\n"
    )
    [w], notes = workloads(("deploy.yaml", KUSTOMIZE_BASE), ("kustomization.yaml", kustomization))
    said = " ".join(notes)
    assert "kustomization.yaml:1 (resources): resources takes a list; what is given is not read" in said
    assert "the target name '(d+)+e' is a regular expression not evaluated here" in said
    assert "its labelSelector is not read here" in said
    assert flags(w) == {"--max-num-seqs": "8"}  # read as written: the kustomization builds nothing from it
