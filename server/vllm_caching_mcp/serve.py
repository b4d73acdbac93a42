"""The `vllm-caching-mcp` command: the tool workers' zygote is started before the MCP SDK is imported.

A stdio server's first tool call runs in a worker forked from the zygote, a process that imports
every tool and loads the knowledge (~0.5 s of CPU) before it forks. Started after this process
had imported the SDK (mcp_server's first lines), the zygote began its work only when the server
was nearly ready, and the first call waited for it: 1.75-1.84 × a bare SDK server's first call.
Started here, from the parsed options (which import neither the SDK nor a tool), it loads on the
second core while this process imports the SDK, and is ready by the time the client has listed
the tools. `python -m vllm_caching_mcp.mcp_server` still serves; its zygote starts later.
"""

from __future__ import annotations

import os
import sys

from .http_transport import StartupError
from .server_options import argument_parser, server_options


def main(argv: list[str] | None = None) -> int:
    args = argument_parser().parse_args(argv)
    workers = None
    try:
        options = server_options(args, os.environ)
        if not options.prepare:
            workers = options.tool_workers()
        if workers is not None:
            workers.start_zygote()
    except StartupError as exc:
        print(f"vllm-caching-mcp: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # the zygote could not be spawned: the first call starts it and says why
        print(f"vllm-caching-mcp: starting the tool worker zygote: {exc.strerror}", file=sys.stderr)
    from .mcp_server import main as serve  # the SDK: imported while the zygote loads the tools

    return serve(argv, workers=workers)


if __name__ == "__main__":
    sys.exit(main())
