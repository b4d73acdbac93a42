"""Reproduce how vLLM 0.27.x fails when its shared CPU-tier region does not fit in /dev/shm.

    python scripts/reproductions/shm_prefault.py --mount [--tmpfs-mib 16] [--region-mib 64] [--ranks N]
    python scripts/reproductions/shm_prefault.py --dir DIR [--region-mib 64] [--ranks N]

vLLM 0.27.x's SharedOffloadRegion (vllm/v1/kv_offload/cpu/shared_offload_region.py) creates the
tier's file with O_CREAT | O_EXCL, sizes it with ftruncate (sparse: no space is taken yet), maps it
MAP_SHARED and pre-faults every page with madvise(MADV_POPULATE_WRITE) before anything else runs
(each worker its own slot of every block row, so the workers together touch every page);
0.28.0 checks the free space first. This script makes the same calls in the same order on a tmpfs
of ``--tmpfs-mib`` (mounted in a temporary directory with ``--mount``, which needs root or a user
namespace; or an existing tmpfs given with ``--dir``) and prints one line, the outcome: on a region
larger than the tmpfs the pre-fault fails with ``OSError(14, 'Bad address')`` at start-up, where a
sparse file without the pre-fault would have died of SIGBUS at the first fill. It needs no vLLM:
the calls are the standard library's, and `knowledge/pitfalls.yaml` records the wheel lines.

Exit status 0 with the outcome printed; 77 (the conventional "skipped") when no tmpfs can be
mounted here, with the reason on stderr.
"""

from __future__ import annotations

import argparse
import mmap
import os
import subprocess
import sys
import tempfile
from pathlib import Path

MIB = 1024 * 1024
SKIPPED = 77
# vLLM uses the constant when Python's mmap module lacks it (Linux 5.14 added the advice).
MADV_POPULATE_WRITE = getattr(mmap, "MADV_POPULATE_WRITE", 23)
SLOT_BYTES = 64 * 1024  # one worker's share of a block row with --ranks (a multiple of the page size)


def _prefault(region: mmap.mmap, region_bytes: int, ranks: int) -> None:
    """SharedOffloadRegion's pre-fault: the whole region without a rank; with ranks, each worker in turn
    its own slot of every block row (the row holds one slot per worker)."""
    if ranks == 0:
        region.madvise(MADV_POPULATE_WRITE, 0, region_bytes)
        return
    slot = SLOT_BYTES
    for rank in range(ranks):
        for row in range(region_bytes // (slot * ranks)):
            region.madvise(MADV_POPULATE_WRITE, row * slot * ranks + rank * slot, slot)


def populate(directory: Path, region_bytes: int, ranks: int = 0) -> str:
    """Create, size, map and pre-fault a region as SharedOffloadRegion does; the outcome as one line."""
    path = directory / "vllm_offload_reproduction.mmap"
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    try:
        os.ftruncate(fd, region_bytes)
        region = mmap.mmap(fd, region_bytes, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        try:
            _prefault(region, region_bytes, ranks)
            return "populated"
        except OSError as exc:
            return repr(OSError(exc.errno, exc.strerror))
        finally:
            region.close()
    finally:
        os.close(fd)
        path.unlink()


def _in_mounted_tmpfs(tmpfs_mib: int, region_mib: int, ranks: int) -> int:
    """Mount a tmpfs of ``tmpfs_mib`` (as root, else in a new user and mount namespace) and run there."""
    with tempfile.TemporaryDirectory(prefix="shm-prefault-") as target:
        inner = [sys.executable, __file__, "--dir", target, "--region-mib", str(region_mib), "--ranks", str(ranks)]
        mount = f"mount -t tmpfs -o size={tmpfs_mib}m tmpfs {target}"
        if os.geteuid() == 0:
            command = ["sh", "-c", f'{mount} && "$@"; status=$?; umount {target}; exit $status', "sh", *inner]
        else:  # the mount lives and dies with the namespace
            command = ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", f'{mount} && exec "$@"', "sh"]
            command += inner
        done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        print(f"shm_prefault: no tmpfs could be mounted here: {done.stderr.strip()}", file=sys.stderr)
        return SKIPPED
    print(done.stdout.strip())
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--mount", action="store_true", help="mount a tmpfs of --tmpfs-mib in a temporary directory")
    where.add_argument("--dir", type=Path, help="an existing tmpfs to create the region in")
    parser.add_argument("--tmpfs-mib", type=int, default=16, help="the tmpfs size with --mount (default 16)")
    parser.add_argument("--region-mib", type=int, default=64, help="the region's size (default 64)")
    parser.add_argument("--ranks", type=int, default=0, help="workers pre-faulting their slots (default 0: no rank)")
    args = parser.parse_args(argv)
    if args.mount:
        return _in_mounted_tmpfs(args.tmpfs_mib, args.region_mib, args.ranks)
    print(populate(args.dir, args.region_mib * MIB, args.ranks))
    return 0


if __name__ == "__main__":
    sys.exit(main())
