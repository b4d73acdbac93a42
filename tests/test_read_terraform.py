"""Terraform: the YAML a resource carries in a heredoc, read where it stands in the file."""

from __future__ import annotations

import pytest

from reading import flags, read, workloads
from vllm_caching_mcp.advice.deployment.read import NothingToReview

RELEASE = """variable "model" { default = "org/m-8b" }

resource "helm_release" "llm" {
  name  = "llm"
  chart = "./charts/server"

  values = [
    <<-EOT
    image:
      repository: vllm/vllm-openai
      tag: v0.11.0
    labels:
      team: "${"ml"}"
    command: "vllm serve ${var.model} --max-num-seqs 32 --gpu-memory-utilization 0.85"
    resources:
      limits:
        nvidia.com/gpu: "2"
    livenessProbe:
      httpGet: {path: /health, port: 8000}
      initialDelaySeconds: 60
    EOT
  ]
}

resource "helm_release" "ui" {
  name   = "ui"
  chart  = "./charts/ui"
  values = [<<EOF
replicaCount: 2
EOF
  ]
}
"""


def test_heredoc_values_of_a_helm_release() -> None:
    [workload], notes = workloads(("main.tf", RELEASE))
    assert workload.name.startswith("helm_release.llm")
    assert (workload.image, workload.image_location.line) == ("vllm/vllm-openai:v0.11.0", 11)
    assert flags(workload) == {"--max-num-seqs": "32", "--gpu-memory-utilization": "0.85"}
    assert {f.location.line for f in workload.flags} == {14}
    assert any("${var.model}" in u for u in workload.unresolved) and workload.model is None
    assert (workload.gpu_count, workload.gpu_location.line) == (2, 17)
    assert [h.location.line for h in workload.hygiene if h.check == "liveness-kills-model-load"] == [19]
    assert any("heredocs" in n for n in notes)


def test_terraform_without_vllm_is_not_read_as_a_deployment() -> None:
    text = RELEASE.replace("vllm serve", "gunicorn app:main").replace("vllm/vllm-openai", "acme/web")
    with pytest.raises(NothingToReview):
        read(("main.tf", text))


def test_a_heredoc_that_is_no_yaml_is_said() -> None:
    text = 'resource "helm_release" "x" {\n  values = [<<EOT\nkey: [unclosed\nEOT\n  ]\n}\n'
    deployment = read(("main.tf", text), ("serve.sh", "vllm serve m --max-num-seqs 4\n"))
    assert any("heredoc of helm_release.x is not read as YAML" in n for n in deployment.notes)


MANIFEST = """resource "kubectl_manifest" "server" {
  yaml_body = <<-YAML
    apiVersion: apps/v1
    kind: Deployment
    metadata:
      name: llm
    spec:
      template:
        spec:
          containers:
            - name: vllm
              image: vllm/vllm-openai:v0.11.0
              args: ["--model", "${var.model}", "--max-num-seqs", "16"]
              resources:
                limits: {nvidia.com/gpu: 1}
  YAML
}
"""


def test_a_manifest_in_a_heredoc_is_read_by_the_manifest_reader() -> None:
    [workload], _ = workloads(("k8s.tf", MANIFEST))
    assert workload.name == "kubectl_manifest.server: Deployment/llm container vllm"
    assert (workload.gpu_count, workload.gpu_location.line) == (1, 15)
    assert [(f.name, f.location.line) for f in workload.flags] == [("--model", 13), ("--max-num-seqs", 13)]
