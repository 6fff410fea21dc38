"""Running `python -m benchmarks ...` from the tests, and checking what it left running."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def cmdlines() -> list[str]:
    """The command line of every process on the machine."""
    out = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                out.append((proc / "cmdline").read_bytes().replace(b"\0", b" ").decode())
            except OSError:
                continue
    return out


async def benchmarks(*args: str, timeout: float = 600) -> str:
    """Run `python -m benchmarks ARGS` from the repository; its stdout. Fails the test, with
    the end of its stderr, unless it exits 0 within `timeout` (then it is killed)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "benchmarks",
        *args,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(timeout):
            stdout, stderr = await proc.communicate()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, stderr.decode()[-3000:]
    return stdout.decode()
