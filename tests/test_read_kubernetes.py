"""Kubernetes manifests: `$(VAR)` references from the container env, a LeaderWorkerSet's group size
(issue 15). The manifests of the corpus are in tests/test_corpus.py.
"""

from __future__ import annotations

from reading import flags, read, workloads


def test_kubernetes_expands_var_references_from_the_container_env() -> None:
    manifest = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: d}
spec:
  template:
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.20.2
        env:
        - {name: TP, value: "4"}
        - name: LEN
          valueFrom: {configMapKeyRef: {name: knobs, key: len}}
        args: [--model, m, --tensor-parallel-size, $(TP), --max-model-len, $(LEN), --served-model-name, $$(TP)]
        resources: {requests: {memory: 100Gi}, limits: {nvidia.com/gpu: 4}}
"""
    [w], _ = workloads(("d.yaml", manifest))
    values = {f.name: f for f in w.flags}
    assert values["--tensor-parallel-size"].value == "4"
    assert values["--served-model-name"].value == "$(TP)"
    assert values["--max-model-len"].unresolved and "configMapKeyRef knobs" in values["--max-model-len"].unresolved
    assert (w.memory_request_gib, w.gpu_count) == (100, 4)


def test_leaderworkerset_group_size_reaches_the_leader_command() -> None:
    manifest = """
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {name: l}
spec:
  leaderWorkerTemplate:
    size: 3
    leaderTemplate:
      spec:
        containers:
        - name: leader
          image: vllm/vllm-openai:v0.20.2
          command: [sh, -c, "ray start --head && vllm serve m --pipeline-parallel-size $(LWS_GROUP_SIZE)"]
"""
    [w], _ = workloads(("l.yaml", manifest))
    assert flags(w)["--pipeline-parallel-size"] == "3" and w.nodes == 3


def test_the_words_of_a_folded_script_keep_their_lines() -> None:
    """`args: [>]` folds the script's lines into one with blanks; each option is still found on its own line."""
    text = """apiVersion: v1
kind: Pod
metadata: {name: vllm}
spec:
  containers:
    - name: main
      image: vllm/vllm-openai:v0.11.0
      command: ["/bin/sh", "-c"]
      args:
        - >
          vllm serve /mnt/models
          --port 8000
          --max-model-len 4096
"""
    [workload] = read(("pod.yaml", text)).workloads
    assert {f.name: f.location.line for f in workload.flags} == {"--port": 12, "--max-model-len": 13}
    assert workload.model == "/mnt/models"
