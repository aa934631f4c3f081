"""Queue names, named once (import-light: no Django, no Celery). One queue and worker pool per tier."""

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

# Queues whose tasks call a model: one message at a time per worker process.
LLM_QUEUES: frozenset[Queue] = frozenset({Queue.CLASSIFY, Queue.EXTRACT, Queue.RESPOND, Queue.SUMMARISE})
