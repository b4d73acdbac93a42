"""Terraform: the YAML a resource carries in a heredoc (`values = [<<-EOT … EOT]` of a helm_release, a
`kubernetes_*` or `kubectl_manifest` body), read where it stands in the file as any YAML that starts vLLM
(yaml_launches). `${…}` interpolations are values Terraform fills in, not known here."""

from __future__ import annotations

import re

from ...common import AdviceError
from ..model import Document
from ..yaml_launches import read_generic
from ..yaml_nodes import Located, load_yaml
from .base import Reading

_RESOURCE = re.compile(r'^\s*(resource|module)\s+"([^"]+)"(?:\s+"([^"]+)")?')
_HEREDOC = re.compile(r"<<(-?)([A-Za-z_][A-Za-z0-9_]*)\s*$")
_YAMLENCODE = re.compile(r"\byamlencode\s*\(")


def _interpolations_unquoted(text: str) -> str:
    """``${…}`` with the quotes inside it dropped (`"${"devops"}"`), so the YAML around it parses; each keeps
    its line, and stays a `${…}` reference: a value not known."""
    out, i = [], 0
    while (start := text.find("${", i)) != -1:
        depth, j = 0, start + 1
        while j < len(text) and text[j] != "\n":
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            if depth == 0:
                break
            j += 1
        out.append(text[i:start] + text[start : j + 1].replace('"', "").replace("'", ""))
        i = j + 1
    return "".join(out) + text[i:]


def _dedented(lines: list[str]) -> list[str]:
    """`<<-` strips the indentation every line shares (Terraform's indented heredoc)."""
    widths = [len(line) - len(line.lstrip()) for line in lines if line.strip()]
    cut = min(widths, default=0)
    return [line[cut:] for line in lines]


def _heredocs(text: str) -> list[tuple[str, int, str]]:
    """(the resource it is in, its first line, its text) of each heredoc of a resource or module block."""
    lines, found, resource, i = text.splitlines(), [], "", 0
    while i < len(lines):
        head = _RESOURCE.match(lines[i])
        if head is not None:
            resource = ".".join(p for p in head.group(2, 3) if p)
        marker = _HEREDOC.search(lines[i])
        if marker is None or not resource:
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == marker.group(2)), None)
        if end is None:
            break
        body = lines[i + 1 : end]
        body = _dedented(body) if marker.group(1) else body
        found.append((resource, i + 2, "\n".join(body)))
        i = end + 1
    return found


class TerraformReader:
    """A `.tf` file (or Terraform text) whose resources carry YAML in heredocs."""

    yaml = False
    partial = False

    def claims(self, doc: Document, roots: list[Located], reading: Reading) -> bool:
        return doc.name.endswith(".tf") or ('resource "helm_release"' in doc.text and "<<" in doc.text)

    def read(self, doc: Document, roots: list[Located], reading: Reading) -> bool:
        before = len(reading.deployment.workloads)
        notes = reading.deployment.notes
        for resource, first, body in _heredocs(doc.text):
            try:
                documents = load_yaml(doc.name, _interpolations_unquoted(body), reading.totals, first)
            except AdviceError as problem:
                why = str(problem).removeprefix("text: ")
                notes.append(f"{doc.name}:{first}: the heredoc of {resource} is not read as YAML: {why}")
                continue
            before_one = len(reading.deployment.workloads)
            if reading.read_yaml is not None:
                reading.read_yaml(doc, documents)  # a manifest, a chart's values: as the YAML readers read them
            else:
                read_generic(doc, documents, reading)
            for workload in reading.deployment.workloads[before_one:]:
                workload.name = f"{resource}: {workload.name}"
        if _YAMLENCODE.search(doc.text):
            notes.append(f"{doc.name}: values written as yamlencode({{…}}) are Terraform objects, not read here")
        if len(reading.deployment.workloads) == before:
            return False  # the shell reader says what it can of the text
        notes.append(
            f"{doc.name}: read from the YAML its resources carry in heredocs; ${{…}} interpolations are values "
            "Terraform fills in, not known here, and the chart's own defaults are in other files"
        )
        return True


READER = TerraformReader()
