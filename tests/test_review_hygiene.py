"""Deployment hygiene across the objects of one deployment (issue 32, item 4): secrets written in plain
text, start-up installs, floating image tags, env values Kubernetes does not expand, duplicate keys,
liveness probes that kill a model load and ReadWriteOnce claims shared by replicas, in every shape the
readers read: a Deployment, a LeaderWorkerSet, a compose service, a shell script and Helm values."""

from __future__ import annotations

import json

import pytest

from reading import read, review
from vllm_caching_mcp.advice.deployment.hygiene import env_secret_issues, floating_tag, install_issues, written_secret
from vllm_caching_mcp.advice.deployment.model import EnvUse, Location
from vllm_caching_mcp.advice.review import ReviewResult

HYGIENE = {
    "pitfall.kill-by-name",
    "pitfall.ray-dashboard-exposed",
    "pitfall.variable-run-as-command",
    "pitfall.compose-services-collide",
    "pitfall.secret-data-not-base64",
    "pitfall.secret-in-plain-text",
    "pitfall.install-at-start",
    "pitfall.install-pin-redirected",
    "pitfall.floating-image-tag",
    "pitfall.env-value-not-expanded",
    "pitfall.duplicate-yaml-key",
    "pitfall.liveness-probe-kills-model-load",
    "pitfall.probe-fails-on-one-miss",
    "pitfall.rwo-volume-shared-by-replicas",
}
KEY = "sk-proj-Zq8rT2vXk4LmN7pQ9sW1aB3c"
HF = "hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ012345"


def hits(result: ReviewResult) -> list[tuple[str, int | None]]:
    """(rule, line) of each hygiene finding, in line order."""
    found = [(f.rule_id, f.location.line) for f in result.findings if f.rule_id in HYGIENE]
    return sorted(found, key=lambda hit: (hit[1] or 0, hit[0]))


def line_of(text: str, needle: str, nth: int = 1) -> int:
    lines = [n for n, line in enumerate(text.splitlines(), 1) if needle in line]
    return lines[nth - 1]


DEPLOYMENT = f"""\
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: model-cache
spec:
  accessModes: [ReadWriteOnce]
  resources: {{requests: {{storage: 200Gi}}}}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: qwen
spec:
  replicas: 3
  template:
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:latest
          command: ["/bin/bash", "-c"]
          args:
            - |
              pip install lmcache>=0.3.9 && \\
              exec vllm serve Qwen/Qwen3-8B --api-key {KEY}
          env:
            - name: HF_TOKEN
              value: $HF_TOKEN
            - name: LD_LIBRARY_PATH
              value: ${{LD_LIBRARY_PATH}}:/usr/local/nvidia/lib64
            - name: CACHE_DIR
              value: $(HF_HOME)/hub
            - name: HF_HOME
              value: /cache
            - name: HF_HUB_CACHE
              value: $(HF_HOME)/hub
            - name: VLLM_LOGGING_LEVEL
              value: INFO
            - name: VLLM_LOGGING_LEVEL
              value: DEBUG
          livenessProbe:
            httpGet: {{path: /health, port: 8000}}
            initialDelaySeconds: 30
            periodSeconds: 10
          volumeMounts:
            - {{name: cache, mountPath: /cache}}
        - name: metrics
          image: prom/statsd-exporter
      volumes:
        - name: cache
          persistentVolumeClaim:
            claimName: model-cache
"""


def test_a_deployment_gets_each_finding_at_its_line() -> None:
    result = review(("qwen.yaml", DEPLOYMENT))
    result.findings.sort(key=lambda f: -(f.location.line or 0))  # by_rule keeps the earliest line of each rule
    text = DEPLOYMENT
    assert hits(result) == [
        ("pitfall.floating-image-tag", line_of(text, "vllm/vllm-openai:latest")),
        ("pitfall.install-at-start", line_of(text, "pip install")),
        ("pitfall.install-pin-redirected", line_of(text, "pip install")),
        ("pitfall.secret-in-plain-text", line_of(text, "--api-key")),
        ("pitfall.env-value-not-expanded", line_of(text, "value: $HF_TOKEN")),
        ("pitfall.env-value-not-expanded", line_of(text, "${LD_LIBRARY_PATH}")),
        ("pitfall.env-value-not-expanded", line_of(text, "$(HF_HOME)/hub")),  # HF_HOME is defined after it
        ("pitfall.duplicate-yaml-key", line_of(text, "name: VLLM_LOGGING_LEVEL", 2)),
        ("pitfall.liveness-probe-kills-model-load", line_of(text, "livenessProbe") + 1),  # the probe's first field
        ("pitfall.floating-image-tag", line_of(text, "prom/statsd-exporter")),
        ("pitfall.rwo-volume-shared-by-replicas", line_of(text, "claimName: model-cache")),
    ]
    by_rule = {f.rule_id: f.message for f in result.findings}
    assert "reviewed as vLLM 0.34.0, the newest the review covers" in by_rule["pitfall.floating-image-tag"]
    assert "3 pods mount the claim model-cache" in by_rule["pitfall.rwo-volume-shared-by-replicas"]
    assert "70 s (30 + 4 × 10)" not in by_rule["pitfall.liveness-probe-kills-model-load"]
    assert "60 s (30 + 3 × 10)" in by_rule["pitfall.liveness-probe-kills-model-load"]


def test_no_finding_or_note_carries_the_secret() -> None:
    result = review(("qwen.yaml", DEPLOYMENT))
    dumped = json.dumps(result.model_dump(mode="json"))
    assert KEY not in dumped and KEY[:12] not in dumped
    secret = next(f for f in result.findings if f.rule_id == "pitfall.secret-in-plain-text")
    assert f"a sk-proj-… key of {len(KEY)} characters" in secret.message


def test_the_floating_image_is_reported_once() -> None:
    """The finding says the release the review took; the note that says so of every unknown tag is not repeated."""
    result = review(("qwen.yaml", DEPLOYMENT))
    assert not [n for n in result.notes if "vllm/vllm-openai:latest" in n and "does not name a vLLM release" in n]


CLEAN = """\
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: models}
spec:
  accessModes: [ReadOnlyMany]
  resources: {requests: {storage: 200Gi}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: qwen}
spec:
  replicas: 3
  template:
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
          args: [--model, Qwen/Qwen3-8B, --api-key, $(VLLM_API_KEY)]
          env:
            - name: VLLM_API_KEY
              valueFrom: {secretKeyRef: {name: vllm, key: api-key}}
            - name: HF_TOKEN
              value: "<your-hf-token>"
            - name: HF_HOME
              value: /models
            - name: HF_HUB_CACHE
              value: $(HF_HOME)/hub
            - name: PRICE
              value: $$5
          startupProbe:
            httpGet: {path: /health, port: 8000}
            failureThreshold: 60
            periodSeconds: 10
          livenessProbe:
            httpGet: {path: /health, port: 8000}
      volumes:
        - name: models
          persistentVolumeClaim: {claimName: models}
"""


def test_the_same_deployment_written_well_gets_none() -> None:
    assert hits(review(("qwen.yaml", CLEAN))) == []


@pytest.mark.parametrize(
    ("value", "named", "secret"),
    [
        (KEY, False, True),  # a service key by its prefix, whatever holds it
        (HF, False, True),
        ("Zm9vYmFyYmF6cXV4MTIzNDU2", True, True),  # a random-looking literal where the name says secret
        ("token-abc123", True, True),  # vLLM's documented example key, deployed: a key all the same
        ("<your-token>", True, False),
        ("xxx", True, False),
        ("hf_xxxxxxxxxxxxxxxx", True, False),
        ("changeme", True, False),
        ("YOUR_HF_TOKEN_HERE", True, False),
        ("hf_token", True, False),
        ("my-api-key", True, False),
        ("$(HF_TOKEN)", True, False),
        ("${HF_TOKEN}", True, False),
        ("EMPTY", True, False),
        ("", True, False),
        ("4096", True, False),  # a number: a limit, not a secret
        ("Zm9vYmFyYmF6cXV4MTIzNDU2", False, False),  # no secret name, no key prefix
    ],
)
def test_what_counts_as_a_secret_written_in(value: str, named: bool, secret: bool) -> None:
    assert written_secret(value, named) is secret


@pytest.mark.parametrize(
    ("name", "value", "secret"),
    [
        ("NEO4J_AUTH", "neo4j/password123", True),  # a user and a password, as the name says it pairs them
        ("BASIC_AUTH", "admin:s3cr3tpw", True),
        ("NEO4J_AUTH", "none", False),  # Neo4j's switch for no authentication
        ("RAY_AUTH_MODE", "token", False),
        ("NEO4J_AUTH", "neo4j/changeme", False),
        ("DATABASE_URL", "postgres://app:s3cr3tpw@db:5432/rag", True),  # a password in a URL, whatever holds it
        ("REDIS_URL", "redis://:${REDIS_PASSWORD}@cache:6379", False),
        ("LMCACHE_REMOTE_URL", "redis://cache:6379", False),
        ("OPENAI_BASE_URL", "http://vllm:8000/v1", False),
    ],
)
def test_credentials_written_in_by_their_shape(name: str, value: str, secret: bool) -> None:
    [found] = env_secret_issues([EnvUse(name=name, value=value, location=Location(file="f", line=1))]) or [None]
    assert (found is not None) is secret


LWS = """\
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: weights}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Ti}}
---
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {name: llama}
spec:
  replicas: 1
  leaderWorkerTemplate:
    size: 2
    leaderTemplate:
      spec:
        containers:
          - name: leader
            image: vllm/vllm-openai:v0.8.5
            command: [sh, -c, "vllm serve meta-llama/Llama-3.1-405B-Instruct -tp 8 --pipeline-parallel-size 2"]
            env:
              - name: LEADER
                value: $(LWS_LEADER_ADDRESS):6379
            volumeMounts: [{name: weights, mountPath: /models}]
        volumes:
          - name: weights
            persistentVolumeClaim: {claimName: weights}
    workerTemplate:
      spec:
        containers:
          - name: worker
            image: vllm/vllm-openai:v0.8.5
            command: [sh, -c, "ray start --block --address=$(LWS_LEADER_ADDRESS):6379"]
            env:
              - name: HF_TOKEN
                value: $HF_TOKEN
"""


def test_a_leaderworkerset_group_and_its_worker_pods() -> None:
    """The worker pods run no vLLM server of their own but belong to it; the controller's LWS_* variables
    are defined for $(VAR); a group of two pods shares the claim. The release (0.8.5) is older than the
    covered ones: the hygiene, which does not depend on it, is judged all the same."""
    result = review(("lws.yaml", LWS))
    assert hits(result) == [
        ("pitfall.rwo-volume-shared-by-replicas", line_of(LWS, "claimName: weights")),
        ("pitfall.env-value-not-expanded", line_of(LWS, "value: $HF_TOKEN")),
    ]
    finding = next(f for f in result.findings if f.rule_id == "pitfall.rwo-volume-shared-by-replicas")
    assert "2 pods mount the claim weights" in finding.message


def test_an_unknown_envfrom_source_leaves_undefined_references_unjudged() -> None:
    text = DEPLOYMENT.replace(
        "          env:\n", "          envFrom: [{secretRef: {name: extra}}]\n          env:\n", 1
    )
    rules = [rule for rule, line in hits(review(("qwen.yaml", text))) if line == line_of(text, "$(HF_HOME)/hub")]
    assert rules == []


COMPOSE = f"""\
services:
  vllm:
    image: vllm/vllm-openai
    entrypoint: [/bin/bash, -c]
    command:
      - uv pip install --system vllm && vllm serve Qwen/Qwen3-8B
    environment:
      HUGGING_FACE_HUB_TOKEN: {HF}
      VLLM_API_KEY: ${{VLLM_API_KEY}}
      LD_LIBRARY_PATH: $LD_LIBRARY_PATH:/opt/lib
"""


def test_a_compose_service() -> None:
    """Compose interpolates $VAR itself, so no env value is called unexpanded; ${VLLM_API_KEY} comes from the
    host."""
    result = review(("compose.yaml", COMPOSE))
    assert hits(result) == [
        ("pitfall.floating-image-tag", 3),
        ("pitfall.install-at-start", 6),
        ("pitfall.secret-in-plain-text", 8),
    ]
    by_rule = {f.rule_id: f.message for f in result.findings}
    assert "no tag (Docker pulls :latest)" in by_rule["pitfall.floating-image-tag"]
    assert "vLLM itself is then whatever release the index holds" in by_rule["pitfall.install-at-start"]
    assert HF not in json.dumps(result.model_dump(mode="json"))


SCRIPT = f"""\
#!/bin/bash
set -e
export HF_TOKEN={HF}
apt-get update && apt-get install -y --no-install-recommends curl > /dev/null 2>&1
pip install -r requirements.txt
python3 -m pip install "lmcache==0.3.9" 'nixl>=0.5'
pip install vllm>=0.10.0
vllm serve Qwen/Qwen3-8B --port 8000 --api-key "$VLLM_API_KEY"
"""


def test_a_launch_script() -> None:
    """Each install before the launch, as the shell reads it: the redirection `> /dev/null` is meant, the
    unquoted `>=` is not; requirements files are not judged; the key comes from the environment."""
    assert hits(review(("start.sh", SCRIPT))) == [
        ("pitfall.secret-in-plain-text", 3),
        ("pitfall.install-at-start", 4),
        ("pitfall.install-at-start", 6),
        ("pitfall.install-at-start", 7),
        ("pitfall.install-pin-redirected", 7),
    ]


def test_installs_after_the_launch_are_not_before_it() -> None:
    assert hits(review(("start.sh", "vllm serve Qwen/Qwen3-8B &\npip install requests\n"))) == []


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        ([("pip", False), ("install", False), ("vllm==0.33.0", False)], []),
        ([("pip", False), ("install", False), ("./wheels/lmcache-0.3.9.whl", False)], []),
        ([("pip", False), ("install", False), ("vllm<0.12", True)], ["install-pin-redirected", "install-at-start"]),
        ([("uv", False), ("pip", False), ("install", False), ("vllm", False)], ["install-at-start"]),
        ([("apt-get", False), ("install", False), ("-y", False), ("curl=7.88.1-10", False)], []),
        ([("pip", False), ("install", False), ("-e", False), (".", False)], []),
        ([("pip", False), ("install", False), (".", False)], []),
        # a URL names one build only by a commit, a hash, a release asset or a version tag; a branch moves
        (
            [("pip", False), ("install", False), ("https://raw.githubusercontent.com/o/r/main/x-0.1.0.whl", False)],
            ["install-at-start"],
        ),
        ([("pip", False), ("install", False), ("git+https://github.com/o/r.git@main", False)], ["install-at-start"]),
        ([("pip", False), ("install", False), ("git+https://github.com/o/r.git@v0.3.9", False)], []),
        (
            [
                ("pip", False),
                ("install", False),
                ("https://raw.githubusercontent.com/o/r/" + "a" * 40 + "/x.whl", False),
            ],
            [],
        ),
        ([("pip", False), ("install", False), ("https://github.com/o/r/releases/download/v1/x.whl", False)], []),
        ([("apt-get", False), ("install", False), ("$PACKAGES", False)], []),
        ([("echo", False), ("install", False), ("vllm", False)], []),
    ],
)
def test_what_an_install_does_wrong(words: list[tuple[str, bool]], expected: list[str]) -> None:
    assert [i.check for i in install_issues(words, Location(file="s.sh", line=1))] == expected


@pytest.mark.parametrize(
    ("image", "tag"),
    [
        ("vllm/vllm-openai", "latest"),
        ("vllm/vllm-openai:latest", "latest"),
        ("lmcache/vllm-openai:latest-nightly", "latest-nightly"),
        ("ghcr.io/llm-d/llm-d:main", "main"),
        ("registry.local:5000/vllm", "latest"),  # the registry's port is no tag
        ("vllm/vllm-openai:v0.33.0", None),
        ("lmcache/vllm-openai:nightly-2025-05-27", None),  # dated: one build
        ("vllm/vllm-openai@sha256:" + "a" * 64, None),
        ("{{ .Values.image }}", None),  # a template fills it in
        ("vllm/vllm-openai:gptoss", "gptoss"),  # vLLM's own image: a tag that names no release is a feature build
        ("vllm/vllm-openai:v0.10.1-gptoss", None),
        ("vllm/vllm-openai:nightly-8ba2f3c1d2e4", None),  # a commit's build
        ("myorg/vllm-openai:gptoss", None),  # another repository's tags are its own
        ("replaced-by-kustomize", None),  # a base's stand-in for the image an overlay sets
        ("IMAGE_PLACEHOLDER", None),
        ("nginx", "latest"),  # a bare name is a library image
        ("example/vllm", "latest"),  # a placeholder word counts only in a bare name
    ],
)
def test_which_image_tags_move(image: str, tag: str | None) -> None:
    assert floating_tag(image) == tag


HELM_EXAMPLE = """\
image:
  repository: vllm/vllm-openai
  tag: v0.33.0
  command: ["vllm", "serve", "Qwen/Qwen3-8B", "--port", "8000"]
replicaCount: 1
livenessProbe:
  initialDelaySeconds: 15
  failureThreshold: 3
  periodSeconds: 10
  httpGet: {path: /health, port: 8000}
"""


def test_the_example_chart_values_probes() -> None:
    """vLLM's example chart writes livenessProbe and startupProbe into the container as given."""
    assert hits(review(("values.yaml", HELM_EXAMPLE))) == [("pitfall.liveness-probe-kills-model-load", 7)]
    started = HELM_EXAMPLE + "startupProbe:\n  failureThreshold: 60\n  periodSeconds: 10\n"
    assert hits(review(("values.yaml", started))) == []


STACK = """\
servingEngineSpec:
  modelSpec:
  - name: qwen
    repository: vllm/vllm-openai
    tag: v0.33.0
    modelURL: Qwen/Qwen3-8B
    replicaCount: 2
    requestGPU: 1
    pvcStorage: 100Gi
routerSpec:
  repository: lmcache/lmstack-router
  tag: latest
"""


def test_production_stack_values_claim_and_router() -> None:
    """The chart makes one claim per modelSpec, ReadWriteOnce unless pvcAccessMode says otherwise, mounted
    by every replica; the router is pulled beside the engines."""
    assert hits(review(("values.yaml", STACK))) == [
        ("pitfall.rwo-volume-shared-by-replicas", 9),
        ("pitfall.floating-image-tag", 12),
    ]
    shared = STACK.replace("    pvcStorage: 100Gi\n", "    pvcStorage: 100Gi\n    pvcAccessMode: [ReadWriteMany]\n")
    assert hits(review(("values.yaml", shared.replace("tag: latest", "tag: 0.1.9")))) == []


def test_a_key_written_twice_in_one_mapping() -> None:
    """The second env: of a container replaces the first (a lenient loader) or fails the apply (kubectl);
    a key that overrides a merged << one is meant and is not reported."""
    text = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: qwen}
spec:
  template:
    metadata:
      labels: &labels {app: qwen, tier: gpu}
    spec:
      nodeSelector:
        <<: *labels
        tier: h100
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.33.0
          args: [--model, Qwen/Qwen3-8B]
          env:
            - {name: HF_TOKEN, valueFrom: {secretKeyRef: {name: hf, key: token}}}
          env:
            - {name: PYTHONHASHSEED, value: "0"}
"""
    result = review(("qwen.yaml", text))
    assert hits(result) == [("pitfall.duplicate-yaml-key", 18)]
    finding = next(f for f in result.findings if f.rule_id == "pitfall.duplicate-yaml-key")
    assert "(first at line 16)" in finding.message
    assert finding.location.path == "spec.template.spec.containers[0].env"


def test_a_file_of_its_own_is_judged_for_the_workloads_beside_it() -> None:
    """A duplicate key in a ConfigMap file reviewed with the Deployment is reported (for the deployment)."""
    config = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata:\n  A: '1'\n  A: '2'\n"
    result = review(("qwen.yaml", CLEAN), ("config.yaml", config))
    assert [(f.rule_id, f.location.file, f.location.line) for f in result.findings if f.rule_id in HYGIENE] == [
        ("pitfall.duplicate-yaml-key", "config.yaml", 6)
    ]


def test_a_statefulset_claim_template_gives_each_pod_its_own() -> None:
    text = """\
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: qwen}
spec:
  replicas: 3
  template:
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.33.0
          args: [--model, Qwen/Qwen3-8B]
          volumeMounts: [{name: cache, mountPath: /models}]
  volumeClaimTemplates:
    - metadata: {name: cache}
      spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 100Gi}}}
"""
    assert hits(review(("qwen.yaml", text))) == []


def test_the_readers_keep_what_they_found_on_the_workload() -> None:
    deployment = read(("qwen.yaml", DEPLOYMENT))
    [workload] = deployment.workloads
    assert {i.check for i in workload.hygiene} == {
        "floating-image-tag",
        "install-at-start",
        "install-pin-redirected",
        "secret-in-plain-text",
        "env-not-expanded",
        "duplicate-key",
        "liveness-kills-model-load",
        "rwo-claim-shared",
    }
    assert [c.claim for c in workload.claims] == ["model-cache"]


def test_a_compose_value_from_the_env_file_beside_it_is_not_written_in_the_compose_file() -> None:
    compose = "services:\n  vllm:\n    image: vllm/vllm-openai:v0.33.0\n    command: [--model, Qwen/Qwen3-8B]\n"
    compose += "    environment:\n      HF_TOKEN: ${HF_TOKEN}\n"
    assert hits(review(("compose.yaml", compose), (".env", f"HF_TOKEN={HF}\n"))) == []
    assert hits(review(("compose.yaml", compose.replace("${HF_TOKEN}", HF)))) == [("pitfall.secret-in-plain-text", 6)]


def test_production_stack_secrets_in_the_values() -> None:
    """The chart makes a Secret of a string hf_token or vllmApiKey; a mapping names an existing one."""
    values = STACK.replace("    pvcStorage: 100Gi\n", f"    hf_token: {HF}\n").replace("tag: latest", "tag: 0.1.9")
    values = values.replace("servingEngineSpec:\n", f"servingEngineSpec:\n  vllmApiKey: {KEY}\n")
    assert hits(review(("values.yaml", values))) == [
        ("pitfall.secret-in-plain-text", 2),
        ("pitfall.secret-in-plain-text", 10),
    ]
    referenced = values.replace(f"hf_token: {HF}", "hf_token: {secretName: hf, secretKey: token}")
    assert hits(review(("values.yaml", referenced.replace(f"vllmApiKey: {KEY}", "vllmApiKey: <key>")))) == []


def test_llm_d_modelservice_container_env() -> None:
    values = """\
modelArtifacts:
  name: Qwen/Qwen3-8B
  uri: hf://Qwen/Qwen3-8B
decode:
  replicas: 1
  containers:
    - name: vllm
      image: ghcr.io/llm-d/llm-d-cuda:v0.4.0
      modelCommand: vllmServe
      env:
        - name: UCX_TLS
          value: ${UCX_TLS},cuda_ipc
        - name: VLLM_NIXL_SIDE_CHANNEL_HOST
          valueFrom: {fieldRef: {fieldPath: status.podIP}}
"""
    assert hits(review(("values.yaml", values))) == [("pitfall.env-value-not-expanded", 12)]


def test_a_configmap_in_envfrom_defines_the_names_before_env() -> None:
    config = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: paths}\ndata: {CACHE_ROOT: /cache}\n---\n"
    text = CLEAN.replace("          env:\n", "          envFrom: [{configMapRef: {name: paths}}]\n          env:\n", 1)
    text = text.replace("value: $(HF_HOME)/hub", "value: $(CACHE_ROOT)/hub")
    assert hits(review(("qwen.yaml", config + text))) == []
    assert hits(review(("qwen.yaml", config + text.replace("$(CACHE_ROOT)", "$(CACHE_DIR)")))) == [
        ("pitfall.env-value-not-expanded", line_of(config + text, "$(CACHE_ROOT)/hub"))
    ]


def test_a_short_weak_key_is_reported_but_not_masked_everywhere() -> None:
    result = review("docker run vllm/vllm-openai:v0.33.0 --model Qwen/Qwen3-8B --api-key vllm")
    assert [rule for rule, _ in hits(result)] == ["pitfall.secret-in-plain-text"]
    assert result.workloads[0].image == "vllm/vllm-openai:v0.33.0"


CLEANUP_SCRIPT = """#!/bin/bash
cleanup() {
    pgrep python | xargs kill -9
    pkill -f python3
}
trap cleanup INT
vllm serve Qwen/Qwen3-8B --port 8100 &
SERVER=$!
pkill -f "vllm serve"
kill $SERVER
killall python
"""


def test_a_script_that_kills_every_python_process() -> None:
    """Kills by an interpreter's name are reported where they are written, in a clean-up function or after the
    launch; a kill of the servers by their own command line or PID is not."""
    found = [(rule, line) for rule, line in hits(review(("run.sh", CLEANUP_SCRIPT))) if rule == "pitfall.kill-by-name"]
    assert found == [("pitfall.kill-by-name", 3), ("pitfall.kill-by-name", 4), ("pitfall.kill-by-name", 11)]


COMPOSE_VARIANTS = """services:
  vllm-cuda:
    image: vllm/vllm-openai:v0.33.0
    container_name: llm
    ports: ["${PORT:-8000}:8000"]
    command: --model Qwen/Qwen3-8B
  vllm-rocm:
    image: rocm/vllm:latest
    container_name: llm
    ports: ["8001:8000"]
    command: --model Qwen/Qwen3-8B
  vllm-cpu:
    image: vllm/vllm-openai:v0.33.0
    ports: [{target: 8000, published: 8000}]
    command: --model Qwen/Qwen3-8B
  vllm-gaudi:
    image: vllm/vllm-openai:v0.33.0
    profiles: [gaudi]
    container_name: llm
    ports: ["8000:8000"]
    command: --model Qwen/Qwen3-8B
"""


def test_compose_services_that_start_together_and_collide() -> None:
    """The default port of ${PORT:-8000} and a long-form published port collide, as do two container names of
    services without profiles; a profiled alternative is not started with them."""
    found = [
        (rule, line)
        for rule, line in hits(review(("compose.yaml", COMPOSE_VARIANTS)))
        if rule == "pitfall.compose-services-collide"
    ]
    assert found == [("pitfall.compose-services-collide", 9), ("pitfall.compose-services-collide", 14)]


SECRET_AND_SERVER = """apiVersion: v1
kind: Secret
metadata: {name: hf-token}
data:
  token: $HF_TOKEN
  encoded: aGZfZXhhbXBsZQ==
  templated: "{{ .Values.token | b64enc }}"
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: qwen}
spec:
  template:
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.33.0
          args: [--model, Qwen/Qwen3-8B]
          env:
            - name: HF_TOKEN
              valueFrom: {secretKeyRef: {name: hf-token, key: token}}
          resources: {limits: {nvidia.com/gpu: 1}}
"""


def test_a_secret_whose_data_is_not_base64() -> None:
    """The API server refuses the Secret over `$HF_TOKEN`; an encoded value and a chart's template are fine."""
    result = review(("deploy.yaml", SECRET_AND_SERVER))
    assert [h for h in hits(result) if h[0] == "pitfall.secret-data-not-base64"] == [
        ("pitfall.secret-data-not-base64", 5)
    ]
    assert all("HF_TOKEN" not in f.message or "variable" in f.message for f in result.findings)


def test_a_probe_that_acts_on_one_failed_check() -> None:
    """failureThreshold 1: one /health answer past timeoutSeconds unreadies (or restarts) a serving pod."""
    base = DEPLOYMENT.replace("vllm/vllm-openai:latest", "vllm/vllm-openai:v0.33.0")
    probe = """          readinessProbe:
            httpGet: {path: /health, port: 8000}
            periodSeconds: 1
            failureThreshold: THRESHOLD
"""
    anchor = "          livenessProbe:\n"
    assert anchor in base
    for threshold, expected in (("1", 1), ("3", 0)):
        text = base.replace(anchor, probe.replace("THRESHOLD", threshold) + anchor, 1)
        found = [f for f in review(("vllm.yaml", text)).findings if f.rule_id == "pitfall.probe-fails-on-one-miss"]
        assert len(found) == expected, (threshold, found)
        if expected:
            assert found[0].location.line == line_of(text, "failureThreshold: 1")
            assert "readinessProbe takes the pod out of its Services" in found[0].message


def test_a_ray_dashboard_on_every_interface_is_judged_on_a_host_not_in_a_pod() -> None:
    """On a bare host 0.0.0.0 is every interface; in a pod (KubeRay's head binds 0.0.0.0 for its Service) the
    pod's network decides, so a script held in a manifest is not judged."""
    script = "ray start --head --port 6379 --dashboard-host 0.0.0.0 --block &\nvllm serve m -tp 2\n"
    assert ("pitfall.ray-dashboard-exposed", 1) in hits(review(("start.sh", script)))
    exported = "export RAY_AUTH_MODE=token\n" + script
    assert "pitfall.ray-dashboard-exposed" not in {r for r, _ in hits(review(("start.sh", exported)))}
    local = script.replace("0.0.0.0", "127.0.0.1")
    assert "pitfall.ray-dashboard-exposed" not in {r for r, _ in hits(review(("start.sh", local)))}
    pod = f"""apiVersion: v1
kind: Pod
metadata: {{name: head}}
spec:
  containers:
  - name: head
    image: vllm/vllm-openai:v0.33.0
    command: [bash, -c, "{script.replace(chr(10), "; ")}"]
"""
    assert "pitfall.ray-dashboard-exposed" not in {r for r, _ in hits(review(("head.yaml", pod)))}


def test_a_variable_written_as_a_command_substitution_in_a_script_not_in_a_manifest() -> None:
    """`$(PROXY_PORT)` in a script runs a command; in a Kubernetes container's args it is Kubernetes' expansion."""
    script = 'PROXY_PORT=${PROXY_PORT:-"8000"}\nlsof -t -i:$(PROXY_PORT) | xargs -r kill -9\nvllm serve m\n'
    assert ("pitfall.variable-run-as-command", 2) in hits(review(("bench.sh", script)))
    unknown = script.replace("$(PROXY_PORT)", "$(hostname)")  # a real command
    assert "pitfall.variable-run-as-command" not in {r for r, _ in hits(review(("bench.sh", unknown)))}
    manifest = """apiVersion: v1
kind: Pod
metadata: {name: vllm}
spec:
  containers:
  - name: vllm
    image: vllm/vllm-openai:v0.33.0
    env: [{name: PORT, value: "8000"}]
    args: ["--model", "m", "--port", "$(PORT)"]
"""
    assert "pitfall.variable-run-as-command" not in {r for r, _ in hits(review(("pod.yaml", manifest)))}
