"""Jeeves' kombu transport for Redis: kombu's own, with two changes on the publishing side.

kombu's Redis channel sends every command that is not a consumer's BRPOP through
`Channel.conn_or_acquire()`, which builds a new `redis.Redis` client per call (`_create_client`):
each one a copy of redis-py's response-callback table, about a tenth of the webhook's CPU per
message. This channel builds that client once per pool and reuses it; it is a thin handle on the
channel's connection pool, which is what it was re-created around every time, so nothing it does
changes (a channel whose pool kombu replaced after a lost connection gets a client on the new one).

A publish can join the caller's Redis pipeline (`publishing_on`): `_put`, the virtual transport's
hook that delivers one message (an `LPUSH` onto the queue's list for its priority, the same key and
body as kombu's), adds its command to that pipeline instead of sending it, so the webhook's window
push, claim check and publish travel in one round trip. kombu 5.7's publish batches do the same;
this does not need them (celery and kombu stay below 5.7, requirements.txt).

Registered as the transport of `redis://` and `rediss://` URLs (`register()`, called by
jeeves/celery.py before any connection exists), so every process, Flower's broker view and the
URLs it prints keep the stock scheme.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from kombu import transport as kombu_transport
from kombu.transport import redis as kombu_redis
from kombu.utils.json import dumps

# The pipeline a publish in this context joins (None: publish on a round trip of its own), and the gate its
# LPUSH waits on (None: none).
_PIPELINE: ContextVar[object | None] = ContextVar("jeeves_publish_pipeline", default=None)
_GATE: ContextVar[Gate | None] = ContextVar("jeeves_publish_gate", default=None)


@dataclass(frozen=True)
class Gate:
    """A Lua script's body (answering 1 or 0) run by Redis right before the LPUSH, in the same script: the
    message is queued only when it answers `passes_on`; the pipeline's result for it is the answer.
    `keys` and `args` are its KEYS and ARGV."""

    script: str
    keys: tuple[str, ...]
    args: tuple[object, ...]
    # The gate's answer that lets this message through (0: a message published for when the gate says no).
    passes_on: int = 1

    def wrapped(self) -> str:
        # The list is the last key and the message the last argument; the script returns the gate's answer.
        return (
            f"local function gate()\n{self.script}\nend\nlocal answer = gate()\n"
            f"if answer == {int(self.passes_on)} then redis.call('LPUSH', KEYS[#KEYS], ARGV[#ARGV]) end\n"
            "return answer"
        )


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
        gate = _GATE.get()
        if gate is None:
            pipe.lpush(self._q_for_pri(queue, pri), dumps(message))
            return
        keys = (*gate.keys, self._q_for_pri(queue, pri))
        pipe.eval(gate.wrapped(), len(keys), *keys, *gate.args, dumps(message))


class Transport(kombu_redis.Transport):
    Channel = Channel


def _server(pool: object) -> tuple:
    kwargs = pool.connection_kwargs  # type: ignore[attr-defined]
    return kwargs.get("host"), kwargs.get("port"), kwargs.get("path"), int(kwargs.get("db") or 0)


def joins_pipelines(channel: object, pipe: object) -> bool:
    """Whether a publish on this kombu channel can join `pipe` (`publishing_on`): a Jeeves channel with no
    key prefix of its own, on the pipeline's server and database."""
    return (
        isinstance(channel, Channel)
        and not channel.global_keyprefix
        and _server(channel.pool) == _server(pipe.connection_pool)  # type: ignore[attr-defined]
    )


@contextmanager
def publishing_on(pipe: object, gate: Gate | None = None) -> Iterator[None]:
    """Within the block, a publish on a Jeeves channel queues its LPUSH on `pipe` (the caller executes it);
    with `gate`, an `EVAL` that pushes only when the gate lets it (its result in the pipeline: the gate's answer).

    Only for a channel that `joins_pipelines(channel, pipe)`: any other publishes at once, before the
    pipeline executes.
    """
    token, gated = _PIPELINE.set(pipe), _GATE.set(gate)
    try:
        yield
    finally:
        _GATE.reset(gated)
        _PIPELINE.reset(token)


def register() -> None:
    """Make this the transport of redis:// and rediss:// URLs (before any connection resolves the alias)."""
    for scheme in ("redis", "rediss"):
        kombu_transport.TRANSPORT_ALIASES[scheme] = f"{__name__}:Transport"
        kombu_transport._transport_cache.pop(scheme, None)
