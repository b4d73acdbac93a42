"""A kustomization given without the resources it builds: no "no vLLM server found", but what it sets
(the images and the vLLM release a tag names, what its patches select) and the files to give with it;
a patch whose target is not among the files is read on its own."""

from __future__ import annotations

from reading import flags, read, review

_IMAGES_ONLY = """\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ../../recipes/modelserver/base
namePrefix: gpu-
images:
  - name: MODEL_SERVER_IMAGE
    newName: vllm/vllm-openai
    newTag: v0.23.0
patches:
  - path: patch-vllm.yaml
"""


def test_a_kustomization_alone_says_what_it_sets_and_what_to_give() -> None:
    deployment = read(("overlay/kustomization.yaml", _IMAGES_ONLY))
    assert deployment.workloads == []
    said = " ".join(deployment.notes)
    assert "overlay/kustomization.yaml: a kustomization whose resources (../../recipes/modelserver/base)" in said
    assert "it holds no vLLM server itself: give those files with it" in said
    assert (
        "kustomization.yaml:7 (images[0]): images sets MODEL_SERVER_IMAGE to vllm/vllm-openai:v0.23.0 (vLLM 0.23.0)"
        in said
    )
    assert "patch patch-vllm.yaml is not among the documents" in said


def test_its_review_is_an_answer_not_an_error() -> None:
    result = review(("overlay/kustomization.yaml", _IMAGES_ONLY))
    assert result.workloads == [] and result.findings == []
    assert any("holds no vLLM server itself" in n for n in result.notes)


_PATCH = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: model-server
spec:
  template:
    spec:
      containers:
        - name: vllm
          args:
            - --tensor-parallel-size
            - "2"
            - --max-num-seqs
            - "256"
"""


def test_a_patch_file_whose_base_is_missing_is_read_on_its_own() -> None:
    deployment = read(("overlay/kustomization.yaml", _IMAGES_ONLY), ("overlay/patch-vllm.yaml", _PATCH))
    [workload] = deployment.workloads
    assert flags(workload) == {"--tensor-parallel-size": "2", "--max-num-seqs": "256"}
    assert workload.location.file == "overlay/patch-vllm.yaml" and workload.pod_elsewhere
    said = " ".join(deployment.notes)
    assert "patch-vllm.yaml: read on its own (its target is not among the files)" in said
    assert "so only its patches are read" in said


_JSON_PATCH = """\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ../base
patches:
  - target:
      kind: Deployment
      name: model-server
    patch: |-
      - op: replace
        path: /spec/template/spec/containers/0/args/0
        value: |-
          exec vllm serve \\
            Qwen/Qwen3-32B \\
            --tensor-parallel-size 2 \\
            --max-num-seq 1024
"""


def test_a_json_patch_value_that_starts_vllm_is_read_as_its_command_line() -> None:
    [workload] = read(("cpu/kustomization.yaml", _JSON_PATCH)).workloads
    assert workload.name == "Deployment/model-server (replace /spec/template/spec/containers/0/args/0)"
    assert workload.model == "Qwen/Qwen3-32B"
    assert flags(workload) == {"--tensor-parallel-size": "2", "--max-num-seq": "1024"}
    assert workload.location.line == 13 and workload.flags[0].location.line == 15
    assert workload.image is None and workload.gpu_count is None


_BASE = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: model-server}
spec:
  template:
    spec:
      containers:
        - name: vllm
          image: MODEL_SERVER_IMAGE
          command: [vllm, serve]
          args: [Qwen/Qwen3-8B]
"""


def test_with_its_base_the_images_are_applied_and_nothing_is_read_alone() -> None:
    kustomization = _IMAGES_ONLY.replace("../../recipes/modelserver/base", "deploy.yaml").replace(
        "patches:\n  - path: patch-vllm.yaml\n", ""
    )
    deployment = read(("deploy.yaml", _BASE), ("kustomization.yaml", kustomization))
    [workload] = deployment.workloads
    assert workload.image == "vllm/vllm-openai:v0.23.0"
    assert not any("holds no vLLM server" in n for n in deployment.notes)


def test_a_kustomization_under_another_file_name_is_known_by_its_kind() -> None:
    deployment = read(("offloading-kustomization.yaml", _JSON_PATCH))
    assert [w.model for w in deployment.workloads] == ["Qwen/Qwen3-32B"]
    assert any("so only its patches are read" in n for n in deployment.notes)


def test_a_patch_file_two_kustomizations_name_is_read_on_its_own_once() -> None:
    other = _IMAGES_ONLY.replace("newTag: v0.23.0", "newTag: v0.24.0")
    deployment = read(
        ("a/kustomization.yaml", _IMAGES_ONLY.replace("patch-vllm.yaml", "../patch-vllm.yaml")),
        ("b/kustomization.yaml", other.replace("patch-vllm.yaml", "../patch-vllm.yaml")),
        ("patch-vllm.yaml", _PATCH),
    )
    assert len(deployment.workloads) == 1
