"""Command lines inside command lines: `eval "…"`, `bash -c "…"` with the shell's own options before the
script (`-exc`, `-o pipefail -c`), in a script and in a container's command."""

from __future__ import annotations

from reading import flags, workloads

_SCRIPT = """\
export HF_HOME=/data
MODEL=facebook/opt-125m
eval "exec vllm serve $MODEL --port 8000 --tensor-parallel-size 2"
bash -exc 'vllm serve m2 --max-model-len 4096'
sh -o pipefail -c "python -m vllm.entrypoints.openai.api_server --model m3"
env bash -lc 'vllm serve m4'
"""


def test_eval_and_shell_options_before_the_script_are_read() -> None:
    found, _ = workloads(("serve.sh", _SCRIPT))
    # the API server module's --model is the model, as `vllm serve`'s positional one
    assert [w.model for w in found] == ["facebook/opt-125m", "m2", "m3", "m4"]
    assert flags(found[0]) == {"--port": "8000", "--tensor-parallel-size": "2"}
    assert flags(found[2]) == {}
    assert [w.location.line for w in found] == [3, 4, 5, 6]
    assert all(("HF_HOME", "/data") in [(e.name, e.value) for e in w.env] for w in found)


def test_eval_reads_its_words_again_as_a_command_line() -> None:
    # the variable's words, expanded inside the quotes, are split when eval reads the line again
    text = '#!/bin/sh\nARGS="--kv-offloading-size 1600"\neval "vllm serve m $ARGS"\n'
    [workload], _ = workloads(("serve.sh", text))
    assert flags(workload) == {"--kv-offloading-size": "1600"}


def test_eval_runs_in_the_same_shell() -> None:
    text = 'eval "export PORT=9000"\nvllm serve m --port "$PORT"\n'
    [workload], _ = workloads(("serve.sh", text))
    assert flags(workload) == {"--port": "9000"}


_CONTAINER = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: prefill}
spec:
  template:
    spec:
      containers:
        - name: app
          image: ubuntu:22.04
          env:
            - {name: PORT, value: "8000"}
          command:
            - /bin/bash
            - "-exc"
            - |
              set -x
              apt-get update
              python -m vllm.entrypoints.openai.api_server \\
                --port ${PORT} \\
                --max-model-len 512
"""


def test_a_container_script_after_clustered_shell_options_is_read() -> None:
    [workload], _ = workloads(("deploy.yaml", _CONTAINER))
    assert flags(workload) == {"--port": "8000", "--max-model-len": "512"}
    assert workload.flags[0].location.line == 19
    assert workload.image == "ubuntu:22.04"
