"""The baseline for cold start, latency and load: a bare MCPServer with one trivial tool, on the same SDK.

python benchmarks/bare_server.py                 # MCP over stdio
python benchmarks/bare_server.py --http PORT     # stateless streamable HTTP on 127.0.0.1:PORT/mcp
"""

import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer(name="bare")


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]), stateless_http=True)
    else:
        server.run("stdio")
