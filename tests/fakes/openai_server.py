"""A small real HTTP server speaking the OpenAI chat-completions and embeddings API, with scripted answers.

Each model name has a queue of scripted behaviours (answer JSON, raw text, an HTTP status, a delay
longer than the client's timeout); when a model's queue is empty its default behaviour applies.
It runs in a thread of the test process, so worker subprocesses reach it over TCP like a provider.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Behaviour:
    """One scripted answer: `json` (an object sent as the message content), `content` (raw text),
    `status` (an HTTP error, with `headers` such as Retry-After), and/or `delay_s` (sleep first, e.g.
    beyond the client's timeout);
    `reply` computes the answer object from the request body (and may act meanwhile, as the world
    does while a real model thinks)."""

    json: Any = None
    content: str | None = None
    status: int = 200
    delay_s: float = 0.0
    reply: Callable[[dict], Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)  # e.g. Retry-After on a 429


def answer(obj: Any) -> Behaviour:
    return Behaviour(json=obj)


def computed(reply: Callable[[dict], Any]) -> Behaviour:
    return Behaviour(reply=reply)


def raw(content: str) -> Behaviour:
    return Behaviour(content=content)


def error(status: int) -> Behaviour:
    return Behaviour(status=status)


def slow(delay_s: float) -> Behaviour:
    return Behaviour(json={}, delay_s=delay_s)


@dataclass
class Request:
    path: str
    model: str
    body: dict


@dataclass
class FakeOpenAI:
    embed_dims: int = 384
    scripts: dict[str, deque[Behaviour]] = field(default_factory=lambda: defaultdict(deque))
    defaults: dict[str, Behaviour] = field(default_factory=dict)
    requests: list[Request] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep the test output quiet
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                fake._handle(self, body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    # ------------------------------------------------------------------ control

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def start(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def script(self, model: str, *behaviours: Behaviour) -> None:
        with self._lock:
            self.scripts[model].extend(behaviours)

    def default(self, model: str, behaviour: Behaviour) -> None:
        with self._lock:
            self.defaults[model] = behaviour

    def reset(self) -> None:
        with self._lock:
            self.scripts.clear()
            self.defaults.clear()
            self.requests.clear()

    def calls(self, model: str | None = None, path: str = "/v1/chat/completions") -> list[Request]:
        with self._lock:
            return [r for r in self.requests if r.path == path and (model is None or r.model == model)]

    # ------------------------------------------------------------------ serving

    def _next(self, model: str) -> Behaviour:
        with self._lock:
            queue = self.scripts.get(model)
            if queue:
                return queue.popleft()
            return self.defaults.get(model, Behaviour(status=404))

    def _handle(self, handler: BaseHTTPRequestHandler, body: dict) -> None:
        model = str(body.get("model", ""))
        path = handler.path
        with self._lock:
            self.requests.append(Request(path=path, model=model, body=body))
        if path.endswith("/embeddings"):
            inputs = body.get("input", [])
            inputs = [inputs] if isinstance(inputs, str) else inputs
            data = [
                {"object": "embedding", "index": i, "embedding": self._vector(str(t))} for i, t in enumerate(inputs)
            ]
            self._send(handler, 200, {"object": "list", "data": data, "model": model, "usage": _usage(5, 0)})
            return
        behaviour = self._next(model)
        if behaviour.delay_s:
            time.sleep(behaviour.delay_s)
        if behaviour.status != 200:
            kind = {429: "rate_limit_exceeded", 503: "service_unavailable", 404: "model_not_found"}.get(
                behaviour.status, "error"
            )
            self._send(
                handler,
                behaviour.status,
                {"error": {"message": f"scripted {behaviour.status}", "type": kind}},
                behaviour.headers,
            )
            return
        if behaviour.reply is not None:
            content = json.dumps(behaviour.reply(body))
        else:
            content = behaviour.content if behaviour.content is not None else json.dumps(behaviour.json)
        self._send(
            handler,
            200,
            {
                "id": "chatcmpl-fake",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
                ],
                "usage": _usage(120, 40),
            },
        )

    def _vector(self, text: str) -> list[float]:
        digest = hashlib.sha256(text.encode()).digest()
        return [((digest[i % len(digest)] / 255.0) - 0.5) for i in range(self.embed_dims)]

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, status: int, payload: dict, headers: dict | None = None) -> None:
        raw_body = json.dumps(payload).encode()
        try:
            handler.send_response(status)
            for name, value in (headers or {}).items():
                handler.send_header(name, value)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(raw_body)))
            handler.end_headers()
            handler.wfile.write(raw_body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (its timeout): nothing to answer


def _usage(prompt: int, completion: int) -> dict[str, int]:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


@contextmanager
def pointed_at(server: FakeOpenAI, settings: Any, slots: dict, **config: Any) -> Iterator[FakeOpenAI]:
    """Jeeves' settings with `slots` (slot → SlotConfig) on the fake provider `server`, the model router
    rebuilt on entry and on exit; `config` overrides other JeevesConfig fields."""
    from django.test import override_settings

    from pipeline import llm

    slots = {**settings.JEEVES.slots, **slots}
    cfg = dataclasses.replace(settings.JEEVES, llm_base_url=server.base_url, llm_api_key="k", slots=slots, **config)
    llm._router.cache_clear()
    try:
        with override_settings(JEEVES=cfg):
            yield server
    finally:
        llm._router.cache_clear()


@contextmanager
def serving(settings: Any, models: dict[str, str], **config: Any) -> Iterator[FakeOpenAI]:
    """A fake provider for one test, with each slot of `models` (slot → model name; fallback `local`)
    pointed at it; `config` overrides other JeevesConfig fields."""
    from ground.config import SlotConfig

    slots = {slot: SlotConfig(model=m, fallback="local") for slot, m in models.items()}
    server = FakeOpenAI().start()
    try:
        with pointed_at(server, settings, slots, **config):
            yield server
    finally:
        server.stop()
