"""Memory of `jeeves up`: resident (RSS) and proportional (PSS) memory of every process it starts, idle after start.

    python bench/memory.py            # starts `jeeves up` in a temp data dir on free ports, measures, stops it
    python bench/memory.py --quick    # the same, the total holding still 5 s instead of 15 (CI)

RSS counts a page shared by several processes in each of them (torch's libraries, the model's weights a
prefork child inherits); PSS divides it among them, so the PSS total is what the machine really holds. The
embedded PostgreSQL is counted too (its server processes, found by their data directory). Target: all
processes together ≤ 2.5 GB.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
MB = 1024 * 1024


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _label(proc: psutil.Process, up_pid: int) -> str:
    cmd = " ".join(proc.cmdline())
    parent = proc.parent()
    parent_cmd = " ".join(parent.cmdline()) if parent is not None else ""
    if proc.pid == up_pid:
        return "jeeves up (honcho)"
    if "postgres" in proc.name():
        return "postgres"
    if proc.name() in {"sh", "bash", "dash"}:
        return "shells (honcho's sh -c)"
    if parent is not None and parent.pid == up_pid and proc.name().startswith("python"):
        return "honcho's process runners"
    if "valkey" in cmd or "redis-server" in cmd:
        return "valkey"
    if "gunicorn" in cmd:
        master = parent is None or parent.name() in {"sh", "bash", "dash"} or "gunicorn" not in parent_cmd
        return "web (gunicorn master)" if master else "web (gunicorn worker)"
    if " beat" in cmd:
        return "beat"
    if " flower" in cmd:
        return "flower"
    if " worker " in cmd and " -Q " in cmd:
        queue = cmd.split(" -Q ", 1)[1].split()[0]
        child = parent is not None and parent.name() not in {"sh", "bash", "dash"} and " worker " in parent_cmd
        return f"worker-{queue} ({'pool child' if child else 'main'})"
    return proc.name()


def _sample(up: psutil.Process, data_dir: Path) -> list[tuple[str, int, int, int]]:
    procs = [up, *up.children(recursive=True)]
    for pg in [p for p in psutil.process_iter(["cmdline"]) if str(data_dir) in " ".join(p.info["cmdline"] or [])]:
        procs += [pg, *pg.children(recursive=True)]
    seen, rows = set(), []
    for p in procs:
        if p.pid in seen:
            continue
        seen.add(p.pid)
        try:
            full = p.memory_full_info()
            rows.append((_label(p, up.pid), p.pid, full.rss, full.pss))
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    # Postgres backends and honcho's shells: one row each for all of them.
    for group in ("postgres", "shells (honcho's sh -c)", "honcho's process runners"):
        members = [r for r in rows if r[0] == group]
        rows = [r for r in rows if r[0] != group]
        if members:
            rows.append(
                (f"{group} x{len(members)}", members[0][1], sum(r[2] for r in members), sum(r[3] for r in members))
            )
    return sorted(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run (CI): the total need hold still 5 s")
    parser.add_argument("--settle", type=float, default=15.0, help="seconds the total must hold still (±2 %%)")
    args = parser.parse_args()
    if args.quick:
        args.settle = min(args.settle, 5.0)

    data_dir = Path(tempfile.mkdtemp(prefix="jeeves-memory-"))
    log = data_dir / "up.log"
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    web = _free_port()
    env.update(
        JEEVES_DATA_DIR=str(data_dir),
        JEEVES_WEB_PORT=str(web),
        JEEVES_EMBEDDED_REDIS_PORT=str(_free_port()),
        JEEVES_FLOWER_PORT=str(_free_port()),
        JEEVES_LOG_LEVEL="INFO",
    )
    command = [sys.executable, "manage.py", "jeeves", "up"]
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 600
        while log.read_text(errors="replace").count(" ready.") < 5:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("jeeves up did not start:\n" + log.read_text(errors="replace")[-3000:])
            time.sleep(1)
        up = psutil.Process(proc.pid)
        # The workers' children load and probe the embedder after "ready": wait until memory holds still.
        last, still_since = 0, time.monotonic()
        while time.monotonic() < deadline:
            total = sum(r[3] for r in _sample(up, data_dir))
            if abs(total - last) > 0.02 * max(last, 1):
                last, still_since = total, time.monotonic()
            elif time.monotonic() - still_since >= args.settle:
                break
            time.sleep(2)
        rows = _sample(up, data_dir)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(data_dir, ignore_errors=True)

    print(f"jeeves up, idle after start ({psutil.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.0f} GB):")
    print(f"{'process':34}{'RSS MB':>9}{'PSS MB':>9}")
    for label, _pid, rss, pss in rows:
        print(f"{label:34}{rss / MB:9.0f}{pss / MB:9.0f}")
    print(f"{'all processes together':34}{sum(r[2] for r in rows) / MB:9.0f}{sum(r[3] for r in rows) / MB:9.0f}")


if __name__ == "__main__":
    main()
