"""Read deployments as operators write them and work out the configuration vLLM will run with.

Accepted: shell text with a `vllm serve` or `python -m vllm.entrypoints.openai.api_server`
line, a `docker run` / `podman run` line, docker-compose files, Kubernetes manifests
(Deployment, StatefulSet, DaemonSet, Job, Pod, LeaderWorkerSet, ConfigMap; multi-document) and
the kustomizations among them (a resource is read as its build makes it: strategic-merge and JSON 6902
patches, `images:` rewrites),
LMCache configuration YAML, Helm values of the vLLM production-stack chart
(`servingEngineSpec.modelSpec`) and of vLLM's example chart (`image.command`), and Dockerfiles (the image a
compose `build:` makes). A pip install of vLLM or LMCache before a launch is kept with it (installs.py), and
release.py works out the release each workload runs from its image and those installs.

Two steps, both pure:

- `parse_documents` (read.py) finds each vLLM process ("workload") and records every flag, environment
  variable, image and model with where it was written: file and line for text, file, line and
  YAML path (``spec.template.spec.containers[0].args[3]``) for manifests. YAML is read through
  PyYAML's node graph so every value keeps its line (yaml_nodes.py). Each input shape is one reader
  in readers/, which read.py chooses between; kustomize.py builds overlays before they are read.
- `resolve` (resolve.py) turns one workload into its effective configuration for a vLLM release: flag
  values after `--no-` negations and `=`/space forms, the `--kv-transfer-config` JSON (also given
  in dotted form), the connector the offload shorthand selects in that release (from the
  knowledge), parallel sizes, offload tier sizes (read where each connector's knowledge entry
  says it takes them) and the numbers rules compare (facts.py), with where each was written.

What is pasted costs time and memory in proportion to its size: the bounds (MAX_*, bounds.py) refuse
what no deployment holds — alias bombs, nesting past 100 levels, more than 1,000 servers or 50,000
arguments — with an error naming the document, and a number too large to use (a 400-digit
literal, NaN in JSON) is left out with a note rather than read as infinity.

This package exports what the rest of the server uses; everything else is imported from its module.
"""

from .bounds import MAX_DOCUMENTS_TEXT
from .flags import flag_bool, normalize_flag, parse_number
from .images import derived_image, image_version
from .model import (
    Deployment,
    Document,
    Documents,
    Effective,
    EnvUse,
    FlagUse,
    HygieneIssue,
    Location,
    PerKnowledge,
    ProxyUse,
    UnreadLaunch,
    Workload,
)
from .read import NothingToReview, parse_documents
from .resolve import find_gpu, resolve, resolve_cache_server

__all__ = [
    "MAX_DOCUMENTS_TEXT",
    "Deployment",
    "Document",
    "Documents",
    "Effective",
    "EnvUse",
    "FlagUse",
    "HygieneIssue",
    "Location",
    "NothingToReview",
    "PerKnowledge",
    "ProxyUse",
    "UnreadLaunch",
    "Workload",
    "derived_image",
    "find_gpu",
    "flag_bool",
    "image_version",
    "normalize_flag",
    "parse_documents",
    "parse_number",
    "resolve",
    "resolve_cache_server",
]
