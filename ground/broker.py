"""Jeeves' kombu transport for Redis: kombu's own, with two changes on the publishing side.

kombu's Redis channel sends every command that is not a consumer's BRPOP through
`Channel.conn_or_acquire()`, which builds a new `redis.Redis` client per call (`_create_client`):
each one a copy of redis-py's response-callback table, about a tenth of the webhook's CPU per
message. This channel builds that client once per pool and reuses it; it is a thin handle on the
channel's connection pool, which is what it was re-created around every time, so nothing it does
changes (a channel whose pool kombu replaced after a lost connection gets a client on the new one).

A publish can join the caller's Redis pipeline (`publishing_on`): `_put`, the virtual transport's
hook that delivers one message (an `LPUSH` onto the queue's list for its priority, the same key and
body as kombu's), adds its command to that pipeline instead of sending it. kombu 5.7's publish
batches do the same; this does not need them (celery and kombu stay below 5.7, requirements.txt).

Registered as the transport of `redis://` and `rediss://` URLs (`register()`, called by
jeeves/celery.py before any connection exists), so every process, Flower's broker view and the
URLs it prints keep the stock scheme.

A task can also be built here instead of by Celery (`TaskMessage.build`): the same message, field for
field, that Celery's `apply_async` and kombu's Redis channel would `LPUSH` (protocol 2, JSON, base64
body; tests/ground/test_broker.py compares the two), for about a tenth of their CPU. The webhook builds
its classify task so and queues it with its gate in one `EVAL` on its pipeline (`Gate.push_one`).
"""

from __future__ import annotations

import base64
import json
import os
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from celery import signals
from celery.utils.nodenames import anon_nodename
from kombu import transport as kombu_transport
from kombu.entity import maybe_delivery_mode
from kombu.transport import redis as kombu_redis
from kombu.utils.json import dumps

from ground.queues import queue_list

# The pipeline a publish in this context joins (None: publish on a round trip of its own).
_PIPELINE: ContextVar[object | None] = ContextVar("jeeves_publish_pipeline", default=None)


@dataclass(frozen=True)
class TaskMessage:
    """One Celery task message (protocol 2, JSON) as kombu's Redis channel queues it: `payload` is what it
    `LPUSH`es onto `list_key`, the list of the task's queue at the message's priority (a queue routed by
    name on the default direct exchange, no key prefix: what `joins_pipelines` checks)."""

    name: str
    queue: str
    list_key: str
    payload: str
    body: tuple

    @classmethod
    def build(
        cls, task, kwargs: dict, *, kwargsrepr: str, expires_s: float, priority: int = 0, queue: str | None = None
    ) -> TaskMessage:
        """What `task.apply_async(kwargs=kwargs, expires=expires_s, priority=priority, argsrepr="()",
        kwargsrepr=kwargsrepr)` would queue, field for field (Celery's `as_task_v2`, its `send_task_message`,
        kombu's `Producer.publish` and the virtual channel's `basic_publish`), without their per-call
        option merging, routing and pool acquisition. The task's own options (its queue, time limits,
        `ignore_result`) are read from the task as Celery reads them, once per process; the message's
        JSON is a template of everything but its per-call fields (`_template`), which are written into it."""
        constants = _constants_of(task)
        queue = queue or constants[1]
        task_id = str(uuid.uuid4())
        body = ((), kwargs, {"callbacks": None, "errbacks": None, "chain": None, "chord": None})
        values = {
            "id": task_id,
            "expires": (datetime.now(UTC) + timedelta(seconds=expires_s)).isoformat(),
            "kwargsrepr": dumps(kwargsrepr)[1:-1],  # a JSON string's content, escaped as in the whole message
            "reply_to": constants[6].thread_oid,
            "delivery_tag": str(uuid.uuid4()),
            "body": base64.b64encode(dumps(body).encode("utf-8")).decode("ascii"),
        }
        texts, slots = _template(constants, queue, priority, expires_s)
        payload = texts[0] + "".join(values[slot] + text for slot, text in zip(slots, texts[1:], strict=True))
        return cls(constants[0], queue, queue_list(queue, priority), payload, body)

    def announce(self) -> None:
        """Celery's `before_task_publish` and `after_task_publish` for this message, once it is queued (only
        when something listens, as Celery does). A receiver sees the message; what it changes is not sent."""
        if not (signals.before_task_publish.receivers or signals.after_task_publish.receivers):
            return
        message = json.loads(self.payload)
        headers, properties = message["headers"], message["properties"]
        if signals.before_task_publish.receivers:
            signals.before_task_publish.send(
                sender=self.name,
                body=self.body,
                exchange="",
                routing_key=self.queue,
                declare=[],
                headers=headers,
                properties=properties,
                retry_policy=None,
            )
        if signals.after_task_publish.receivers:
            signals.after_task_publish.send(
                sender=self.name, body=self.body, headers=headers, exchange="", routing_key=self.queue
            )


# A message's fields that change from call to call; the rest is the same for a task, queue, priority and expiry.
_SLOTS = ("id", "expires", "kwargsrepr", "reply_to", "delivery_tag", "body")
_templates: dict[tuple, tuple[tuple[str, ...], tuple[str, ...]]] = {}


def _template(constants: tuple, queue: str, priority: int, expires_s: float) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The message's JSON (kombu's envelope around Celery's headers and properties) cut around its per-call
    fields: (the texts between them, the fields' names in order), made once per task, queue, priority and
    expiry by serialising the message with a placeholder in each of those fields."""
    key = (constants, queue, priority, expires_s)
    found = _templates.get(key)
    if found is None:
        name, _queue, timelimit, ignore_result, origin, delivery_mode, _app = constants
        slot = {name_: f"@jeeves-slot-{name_}@" for name_ in _SLOTS}
        headers = {
            "lang": "py",
            "task": name,
            "id": slot["id"],
            "shadow": None,
            "eta": None,
            "expires": slot["expires"],
            "group": None,
            "group_index": None,
            "retries": 0,
            "timelimit": list(timelimit),
            "root_id": slot["id"],
            "parent_id": None,
            "argsrepr": "()",
            "kwargsrepr": slot["kwargsrepr"],
            "origin": origin,
            "ignore_result": ignore_result,
            "replaced_task_nesting": 0,
            "stamped_headers": None,
            "stamps": {},
        }
        properties = {
            "correlation_id": slot["id"],
            "reply_to": slot["reply_to"],
            "argsrepr": "()",
            "kwargsrepr": slot["kwargsrepr"],
            "delivery_mode": delivery_mode,
            "expiration": str(int(expires_s * 1000)),
            "delivery_info": {"exchange": "", "routing_key": queue},
            "priority": priority,
            "body_encoding": "base64",
            "delivery_tag": slot["delivery_tag"],
        }
        message = {
            "body": slot["body"],
            "content-encoding": "utf-8",
            "content-type": "application/json",
            "headers": headers,
            "properties": properties,
        }
        pieces = re.split(r"@jeeves-slot-(\w+)@", dumps(message))
        found = _templates[key] = (tuple(pieces[0::2]), tuple(pieces[1::2]))
    return found


_constants: dict[tuple[int, int], tuple] = {}


def _constants_of(task) -> tuple:
    """What a task's messages share in this process, read once (a shared task is a proxy, each attribute a
    lookup): its name, queue, time limits and `ignore_result`; the process's origin, Celery's
    `anon_nodename()` (gen<pid>@<host>); kombu's number for `task_default_delivery_mode`; the app."""
    key = (os.getpid(), id(task))
    found = _constants.get(key)
    if found is None:
        task = task._get_current_object() if hasattr(task, "_get_current_object") else task
        app = task.app
        found = _constants[key] = (
            task.name,
            task.queue,
            (task.time_limit, task.soft_time_limit),
            task.ignore_result,
            anon_nodename(),
            maybe_delivery_mode(app.conf.task_default_delivery_mode),
            app,
        )
    return found


@dataclass(frozen=True)
class Gate:
    """A Lua script's body (answering 1 or 0) that Redis runs right before queueing one of two messages, in
    the same script (`push_one`); the pipeline's result for it is the answer. `keys` and `args` are its
    KEYS and ARGV."""

    script: str
    keys: tuple[str, ...]
    args: tuple[object, ...]

    def wrapped(self) -> str:
        # The two lists are the last keys and the two messages the last arguments; the script returns the answer.
        return (
            f"local function gate()\n{self.script}\nend\nlocal answer = gate()\n"
            "if answer == 1 then redis.call('LPUSH', KEYS[#KEYS - 1], ARGV[#ARGV - 1])\n"
            "else redis.call('LPUSH', KEYS[#KEYS], ARGV[#ARGV]) end\n"
            "return answer"
        )

    def push_one(self, pipe: object, passed: TaskMessage, held: TaskMessage) -> None:
        """Add to `pipe` an `EVAL` that runs the gate and queues `passed` when it answers 1, `held` when 0."""
        keys = (*self.keys, passed.list_key, held.list_key)
        pipe.eval(self.wrapped(), len(keys), *keys, *self.args, passed.payload, held.payload)  # type: ignore[attr-defined]


class Channel(kombu_redis.Channel):
    _sync_client = None

    def _create_client(self, asynchronous=False):
        if asynchronous:  # the consumer's BRPOP / pub-sub clients: kombu caches those itself
            return super()._create_client(asynchronous=True)
        client = self._sync_client
        if client is None or client.connection_pool is not self.pool:
            client = self._sync_client = super()._create_client()
        return client

    def _put(self, queue, message, **kwargs):
        pipe = _PIPELINE.get()
        if pipe is None or self.global_keyprefix:
            return super()._put(queue, message, **kwargs)
        pri = self._get_message_priority(message, reverse=False)
        pipe.lpush(self._q_for_pri(queue, pri), dumps(message))


class Transport(kombu_redis.Transport):
    Channel = Channel


def _server(pool: object) -> tuple:
    kwargs = pool.connection_kwargs  # type: ignore[attr-defined]
    return kwargs.get("host"), kwargs.get("port"), kwargs.get("path"), int(kwargs.get("db") or 0)


def joins_pipelines(channel: object, pipe: object) -> bool:
    """Whether a publish on this kombu channel can join `pipe` (`publishing_on`, or a `TaskMessage` queued on
    it): a Jeeves channel with no key prefix of its own, on the pipeline's server and database."""
    return (
        isinstance(channel, Channel)
        and not channel.global_keyprefix
        and _server(channel.pool) == _server(pipe.connection_pool)  # type: ignore[attr-defined]
    )


@contextmanager
def publishing_on(pipe: object) -> Iterator[None]:
    """Within the block, a publish on a Jeeves channel queues its LPUSH on `pipe` (the caller executes it).

    Only for a channel that `joins_pipelines(channel, pipe)`: any other publishes at once, before the
    pipeline executes.
    """
    token = _PIPELINE.set(pipe)
    try:
        yield
    finally:
        _PIPELINE.reset(token)


def register() -> None:
    """Make this the transport of redis:// and rediss:// URLs (before any connection resolves the alias)."""
    for scheme in ("redis", "rediss"):
        kombu_transport.TRANSPORT_ALIASES[scheme] = f"{__name__}:Transport"
        kombu_transport._transport_cache.pop(scheme, None)
