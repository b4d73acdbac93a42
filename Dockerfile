# vllm-caching-mcp as a shared streamable-HTTP MCP server for many agents.
#
#   docker build -t vllm-caching-mcp .
#   docker run --rm -p 8000:8000 -e MCP_TOKEN="$(openssl rand -hex 24)" vllm-caching-mcp \
#     --transport streamable-http --host 0.0.0.0 --allowed-host '*' --auth-token-env MCP_TOKEN
#
# The server is stateless (any replica answers any request), reads nothing from disk but its own
# knowledge, and needs no write access except its optional GitHub/registry cache (/tmp here).

FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY server ./server
COPY knowledge ./knowledge
RUN pip install --no-cache-dir build==1.* && python -m build --wheel --outdir /dist

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    VLLM_CACHING_MCP_CACHE_DIR=/tmp/vllm-caching-mcp
COPY --from=build /dist/*.whl /tmp/wheels/
RUN pip install --no-cache-dir /tmp/wheels/*.whl && rm -rf /tmp/wheels \
    && useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin mcp
USER 10001:10001
# Validates the knowledge at build time and stores the start-up cache the server user will read.
RUN vllm-caching-mcp --prepare
EXPOSE 8000
# Straight to the server: urllib would send even a loopback request to HTTP_PROXY unless NO_PROXY names it.
HEALTHCHECK --interval=30s --timeout=3s \
    CMD ["python", "-c", "import urllib.request as u; u.build_opener(u.ProxyHandler({})).open('http://127.0.0.1:8000/healthz', timeout=2)"]
ENTRYPOINT ["vllm-caching-mcp"]
# Binding every interface requires naming the Host headers clients use (DNS-rebinding protection);
# '*' accepts any, for use behind a Service or proxy. Add --auth-token-env NAME for a shared token.
CMD ["--transport", "streamable-http", "--host", "0.0.0.0", "--port", "8000", "--allowed-host", "*"]
