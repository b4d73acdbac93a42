"""A Helm chart's template read as the YAML it renders to: actions set aside line by line, a `| default` taken as
the value, lines inside an if/with/range judged as rendered only where the values ask, keys an include or
toYaml fills not judged."""

from __future__ import annotations

from reading import flags, review, workloads
from vllm_caching_mcp.advice.deployment.chart_template import is_chart_template, rendered_shape

TEMPLATE = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "vllm.fullname" . }}
  labels:
    {{- include "vllm.labels" . | nindent 4 }}
spec:
  replicas: {{ .Values.replicaCount }}
  template:
    spec:
      containers:
        - name: vllm
          image: "{{ .Values.image.repository }}:{{ .Values.image.tag | default "v0.22.1" }}"
          args:
            - "--model={{ .Values.model }}"
            - "--max-model-len={{ .Values.maxModelLen | default 8192 }}"
            {{- if .Values.swapSpace }}
            - "--swap-space={{ .Values.swapSpace }}"
            {{- end }}
          env:
            {{- if .Values.hfToken }}
            - name: HF_TOKEN
              value: {{ .Values.hfToken | quote }}
            {{- else }}
            - name: HF_TOKEN
              valueFrom: {secretKeyRef: {name: hf, key: token}}
            {{- end }}
          resources:
            {{- toYaml .Values.resources | nindent 12 }}
          tensorParallel: {{ .Values.tp | default 2 }}
"""


def test_a_template_keeps_its_lines_and_marks_what_its_values_decide() -> None:
    assert is_chart_template(TEMPLATE) and not is_chart_template("a: '{{ not a chart }}'\n")
    shape = rendered_shape(TEMPLATE)
    assert shape.text.count("\n") == TEMPLATE.count("\n")
    lines = shape.text.split("\n")
    assert lines[3] == "  name: '{{ include \"vllm.fullname\" . }}'" and lines[5] == ""
    assert lines[29] == "          tensorParallel: 2"  # the template's default
    assert lines[12].endswith(':v0.22.1"')  # a default inside a quoted string too
    assert "`if .Values.swapSpace`" in shape.conditional[18] and 16 not in shape.conditional
    assert shape.filled == {5, 28}  # labels and resources: their content is an include's, the values' toYaml


def test_a_template_is_reviewed_as_it_renders() -> None:
    [w], notes = workloads(("templates/deployment.yaml", TEMPLATE))
    assert flags(w)["--swap-space"] == "{{ .Values.swapSpace }}"
    assert any("read as a Helm chart template" in n for n in notes)
    result = review(("templates/deployment.yaml", TEMPLATE), version="0.22.1")
    (swap,) = [f for f in result.findings if "--swap-space" in f.message]
    assert (
        swap.severity == "warning"
        and "line 18: the template renders it only where `if .Values.swapSpace` holds" in swap.message
    )
    # HF_TOKEN in both branches of an if is not a key written twice; resources a toYaml fills is not "no GPU"
    assert not {"pitfall.duplicate-yaml-key", "pitfall.no-gpu-requested"} & {f.rule_id for f in result.findings}


def test_a_key_the_template_fills_in_and_a_helm_variable_in_a_value_are_read_as_text() -> None:
    template = TEMPLATE.replace(
        '  labels:\n    {{- include "vllm.labels" . | nindent 4 }}\n',
        "  labels:\n    {{ .Values.poolLabelKey }}: {{ .Values.poolLabelValue }}\n",
    ).replace(
        "          resources:\n",
        "            {{- range $key, $val := .Values.extraEnv }}\n"
        "            - name: {{ $key }}\n"
        "              value: {{ $val | quote }}\n"
        "            {{- end }}\n"
        "          resources:\n",
    )
    lines = rendered_shape(template).text.split("\n")
    assert lines[5] == "    '{{ .Values.poolLabelKey }}': '{{ .Values.poolLabelValue }}'"
    result = review(("templates/deployment.yaml", template), version="0.22.1")
    assert "pitfall.env-value-not-expanded" not in {f.rule_id for f in result.findings}  # $val is Helm's, not a shell's
