"""How many GitHub requests, and how much wall time, check_bug_status costs for the tracked set.

    python benchmarks/bench_bug_status.py [--latency 0.05] [--runs 3]

A stand-in GitHub on 127.0.0.1 (tests/github_standin.py) answers every request after a fixed
injected latency; nothing reaches the internet. Measured in the same run:

- baseline: one plain ``GET /repos/{owner}/{repo}/issues/{n}`` per tracked bug, one after another,
  no cache (what a naive script does; it learns the state but not who closed it or the PRs);
- check_bug_status over REST (no token): cold (empty cache), warm (within the TTL) and after the
  TTL expired (REST revalidates with If-None-Match and gets 304s, which an authorised client is
  not charged rate limit for; GraphQL is a POST and is simply asked again);
- the same over GraphQL (token present): one request for all bugs.

Each line reports requests sent and the median wall time of ``--runs`` runs, and both as ratios
to the baseline.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from github_standin import FakeGitHub  # noqa: E402
from vllm_caching_mcp.advice import bugs  # noqa: E402
from vllm_caching_mcp.github import GitHubClient, GitHubSettings, Token  # noqa: E402
from vllm_caching_mcp.knowledge import load_knowledge  # noqa: E402


def baseline(base: str) -> int:
    knowledge = load_knowledge()
    with httpx.Client(trust_env=False) as client:
        for bug in knowledge.bugs:
            client.get(f"{base}/repos/{bug.repo}/issues/{bug.number}").raise_for_status()
    return len(knowledge.bugs)


def tool(base: str, cache: Path, ttl: float, token: Token | None) -> int:
    settings = GitHubSettings(api_base=base, cache_dir=cache, cache_ttl=ttl, token=token)
    bugs.client_factory = lambda: GitHubClient(settings)
    result = bugs.check_bug_status(bugs.CheckBugStatusRequest(deadline_seconds=60), load_knowledge())
    sources = {b.provenance.source for b in result.bugs}
    assert sources <= {"live", "cache"}, f"fell back: {sources}"
    return result.requests_made


def measure(run: Callable[[], int], runs: int, prepare: Callable[[], None] = lambda: None) -> tuple[int, float]:
    times, requests = [], 0
    for _ in range(runs):
        prepare()
        started = time.perf_counter()
        requests = run()
        times.append(time.perf_counter() - started)
    return requests, statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.05, help="seconds the stand-in waits per request")
    parser.add_argument("--runs", type=int, default=3, help="runs per scenario; the median time is reported")
    args = parser.parse_args()
    load_knowledge()  # loading the knowledge is not what is measured
    fake = FakeGitHub.from_knowledge(load_knowledge(), latency=args.latency)
    base = fake.start()
    rows: list[tuple[str, int, float]] = []
    try:
        rows.append(("baseline: 1 GET per bug, sequential", *measure(lambda: baseline(base), args.runs)))
        for label, token in (("REST", None), ("GraphQL", Token("bench-token"))):
            with tempfile.TemporaryDirectory() as tmp:
                cache = Path(tmp)

                def empty_cache(cache: Path = cache) -> None:
                    for file in cache.glob("*.json"):
                        file.unlink()

                def run(ttl: float, cache: Path = cache, token: Token | None = token) -> Callable[[], int]:
                    return lambda: tool(base, cache, ttl, token)

                rows.append((f"{label}: cold", *measure(run(3600), args.runs, empty_cache)))
                rows.append((f"{label}: warm (within TTL)", *measure(run(3600), args.runs)))
                rows.append((f"{label}: after TTL expiry", *measure(run(0), args.runs)))
    finally:
        fake.stop()
    bugs_tracked = len(load_knowledge().bugs)
    base_requests, base_time = rows[0][1], rows[0][2]
    print(
        f"{bugs_tracked} tracked bugs, {args.latency * 1000:.0f} ms injected latency per request, median of {args.runs}"
    )
    print(f"{'scenario':<40} {'requests':>8} {'wall ms':>9} {'req ratio':>10} {'time ratio':>10}")
    for label, requests, seconds in rows:
        print(
            f"{label:<40} {requests:>8} {seconds * 1000:>9.1f} "
            f"{requests / base_requests:>10.2f} {seconds / base_time:>10.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
