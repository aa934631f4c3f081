"""Queue names, named once (import-light: no Django, no Celery). One queue and worker pool per tier."""

from bisect import bisect
from enum import StrEnum


class Queue(StrEnum):
    CLASSIFY = "classify"
    EXTRACT = "extract"
    EMBED = "embed"
    RESPOND = "respond"
    SUMMARISE = "summarise"


# Hard time limits per queue in seconds; the soft limit is 80 % of it. Redis' visibility
# timeout is set above the longest of them so a slow task is not redelivered while it runs.
TIME_LIMITS: dict[Queue, int] = {
    Queue.CLASSIFY: 60,
    Queue.EXTRACT: 300,
    Queue.EMBED: 120,
    Queue.RESPOND: 180,
    Queue.SUMMARISE: 600,
}


# Redis keeps a queue's messages of each priority step in a list of its own (kombu's default steps, 0 first);
# a message over its channel's rate is published at the lowest (wire_bridge/ingest.py).
PRIORITY_STEPS: tuple[int, ...] = (0, 3, 6, 9)
LOW_PRIORITY = 9


def queue_lists(queue: str) -> list[str]:
    """The Redis lists holding `queue`'s waiting messages, one per priority step."""
    return [queue if step == 0 else f"{queue}\x06\x16{step}" for step in PRIORITY_STEPS]


def queue_list(queue: str, priority: int) -> str:
    """The Redis list a message of `queue` at `priority` waits in (kombu's: the priority clamped to 0-9, then
    the highest step not above it)."""
    step = PRIORITY_STEPS[bisect(PRIORITY_STEPS, max(0, min(priority, 9))) - 1]
    return queue if step == 0 else f"{queue}\x06\x16{step}"


def worker_argv(
    python: str,
    queues: str,
    *,
    name: str,
    pool: str | None = None,
    concurrency: int = 1,
    mingle: bool = True,
    heartbeat: bool = True,
) -> list[str]:
    """The command line of a Celery worker consuming `queues` (comma-separated), the one shape `jeeves up`, the
    tests and the benchmarks start: Jeeves' app, a node `name`, no gossip; `pool` when not Celery's default."""
    argv = [python, "-m", "celery", "-A", "jeeves", "worker", "-Q", queues, "-n", name]
    argv += ["--pool", pool] if pool else []
    argv += ["--concurrency", str(concurrency), "--without-gossip", "--loglevel", "INFO"]
    argv += [] if mingle else ["--without-mingle"]
    argv += [] if heartbeat else ["--without-heartbeat"]
    return argv
