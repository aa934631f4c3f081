"""Fake Wire peers for tests: a sidecar (protocol v1) and Roman, as small real HTTP servers.

Both validate what Jeeves sends (bearer tokens, ids, mention offsets inside the text in UTF-16
units, unique button ids), record it, and can emit events at the bridge. Use:

    with FakeSidecar(secret="s") as sidecar:          # sidecar.url -> JEEVES_WIRE_SIDECAR_URL
        sidecar.emit(bridge_url, sidecar_text(conv, user, "m1", "hello"))
        sidecar.wait_for_messages(1)                   # -> list of the JSON bodies Jeeves posted
        sidecar.fail_next(503, times=2)                # the next two posts get a 503

    with FakeRoman(service_secret="r") as roman:       # roman.url -> JEEVES_ROMAN_URL
        bot = roman.add_bot(bridge_url, conversation_id=conv, members=[user])  # emits bot_request
        roman.emit(bridge_url, roman.new_text(bot, user, "m1", "hello"))
        roman.messages                                 # [(bot_id, body), ...]

`errors` lists every request a fake refused as invalid; a test should assert it stays empty.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def utf16_slice(text: str, offset: int, length: int) -> str:
    raw = text.encode("utf-16-le")
    return raw[offset * 2 : (offset + length) * 2].decode("utf-16-le", errors="replace")


def _check_mentions(text: str, mentions: Any, qualified: bool) -> str | None:
    if not isinstance(mentions, list):
        return "mentions is not a list"
    for m in mentions:
        if not isinstance(m, dict) or not isinstance(m.get("offset"), int) or not isinstance(m.get("length"), int):
            return "mention without offset/length"
        user = m.get("userId")
        if qualified and not (isinstance(user, dict) and user.get("id") and user.get("domain")):
            return "mention userId is not a qualified id"
        if not qualified and not (isinstance(user, str) and user and "@" not in user):
            return "mention userId is not a bare id"
        if m["offset"] < 0 or m["length"] < 1 or m["offset"] + m["length"] > utf16_len(text):
            return "mention outside the text (UTF-16 units)"
        if not utf16_slice(text, m["offset"], m["length"]).startswith("@"):
            return "mention does not start at an @"
    return None


class _Answer(Exception):
    """Raised inside `handle` to answer at once with `status` and `body`."""

    def __init__(self, status: int, body: dict) -> None:
        super().__init__(status)
        self.status, self.body = status, body


class _Server:
    """A threaded HTTP server whose handler calls `self.handle(method, path, headers, body)`."""

    def __init__(self) -> None:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    status, body = owner.handle(method, self.path, dict(self.headers), raw)
                except _Answer as answer:
                    status, body = answer.status, answer.body
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                self._serve("POST")

            def do_GET(self) -> None:
                self._serve("GET")

            def log_message(self, *args: Any) -> None:
                pass

        self.lock = threading.Lock()
        self.errors: list[str] = []
        self._failures: list[int] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> _Server:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def fail_next(self, status: int, times: int = 1) -> None:
        """Answer the next `times` POSTs with `status` (e.g. 503 to exercise retries)."""
        with self.lock:
            self._failures.extend([status] * times)

    def _scripted_failure(self) -> int | None:
        with self.lock:
            return self._failures.pop(0) if self._failures else None

    def _refuse(self, reason: str) -> tuple[int, dict]:
        with self.lock:
            self.errors.append(reason)
        return 400, {"message": reason}

    def _unauthorised(self, message: str) -> tuple[int, dict]:
        with self.lock:
            self.errors.append("bad bearer")
        return 401, {"message": message}

    def _posted(self, raw: bytes) -> dict:
        """A POST's JSON body; raises `_Answer` with the scripted failure (`fail_next`) or a 400 when not JSON."""
        failure = self._scripted_failure()
        if failure:
            raise _Answer(failure, {"message": "scripted failure"})
        try:
            return json.loads(raw)
        except ValueError:
            raise _Answer(*self._refuse("not JSON")) from None

    def handle(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> tuple[int, dict]:
        raise NotImplementedError


# --------------------------------------------------------------------------- sidecar


def qid(raw: str) -> dict[str, str]:
    ident, _, domain = raw.partition("@")
    return {"id": ident, "domain": domain}


def sidecar_text(
    conversation: str,
    sender: str,
    message_id: str,
    text: str,
    mentions: list[tuple[str, int, int]] = (),
    timestamp: str = "2026-03-02T09:00:00Z",
    expires_after_ms: int | None = None,
) -> dict:
    """A `text_message` event; ids are qualified strings "uuid@domain", mention offsets in UTF-16 units."""
    return {
        "eventId": str(uuid.uuid4()),
        "type": "text_message",
        "conversationId": qid(conversation),
        "sender": qid(sender),
        "messageId": message_id,
        "timestamp": timestamp,
        "text": text,
        "mentions": [{"userId": qid(u), "offset": o, "length": n} for u, o, n in mentions],
        "quotedMessageId": None,
        "expiresAfterMillis": expires_after_ms,
    }


def mention_of(text: str, needle: str, user: str) -> tuple[str, int, int]:
    """The (user, UTF-16 offset, UTF-16 length) of the first `needle` (e.g. "@jeeves") in `text`."""
    index = text.index(needle)
    return (user, utf16_len(text[:index]), utf16_len(needle))


def sidecar_app_added(
    conversation: str, members: list[dict], name: str = "test channel", kind: str = "GROUP", tz: str | None = None
) -> dict:
    """`members`: [{"userId": "uuid@domain", "role": "ADMIN", "name": ..., "handle": ...}]."""
    body = {
        "eventId": str(uuid.uuid4()),
        "type": "app_added",
        "conversation": {"id": qid(conversation), "name": name, "teamId": None, "type": kind},
        "members": [{**m, "userId": qid(m["userId"])} for m in members],
    }
    if tz:
        body["timezone"] = tz
    return body


class FakeSidecar(_Server):
    """The JVM sidecar embedding the Wire Apps SDK, as Jeeves sees it."""

    def __init__(self, secret: str, conversations: set[str] | None = None) -> None:
        super().__init__()
        self.secret = secret
        self.conversations = conversations  # None: every conversation exists
        self.messages: list[dict] = []

    def handle(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> tuple[int, dict]:
        if method != "POST" or path != "/v1/messages":
            return 404, {"message": "no such endpoint"}
        if headers.get("Authorization") != f"Bearer {self.secret}":
            return self._unauthorised("unauthorised")
        body = self._posted(raw)
        conv = body.get("conversationId")
        if not (isinstance(conv, dict) and conv.get("id") and conv.get("domain")):
            return self._refuse("conversationId is not a qualified id")
        if self.conversations is not None and f"{conv['id']}@{conv['domain']}" not in self.conversations:
            return 404, {"message": "unknown conversation"}
        kind = body.get("type")
        if kind in {"text", "composite"}:
            if not isinstance(body.get("text"), str) or not body["text"]:
                return self._refuse("text missing")
            problem = _check_mentions(body["text"], body.get("mentions", []), qualified=True)
            if problem:
                return self._refuse(problem)
            if kind == "composite":
                buttons = body.get("buttons")
                if not isinstance(buttons, list) or not buttons:
                    return self._refuse("composite without buttons")
                ids = [b.get("id") for b in buttons if isinstance(b, dict)]
                if len(ids) != len(buttons) or not all(isinstance(i, str) and i for i in ids):
                    return self._refuse("button without id")
                if len(set(ids)) != len(ids):
                    return self._refuse("button ids not unique")
                if not all(isinstance(b.get("text"), str) and b["text"] for b in buttons):
                    return self._refuse("button without text")
        elif kind == "button_confirmation":
            if not isinstance(body.get("referencedMessageId"), str):
                return self._refuse("referencedMessageId missing")
            if body.get("buttonId") is not None and not isinstance(body["buttonId"], str):
                return self._refuse("buttonId is not a string")
        else:
            return self._refuse(f"unknown message type {kind!r}")
        message_id = str(uuid.uuid4())
        with self.lock:
            self.messages.append({**body, "_messageId": message_id})
        return 200, {"messageId": message_id}

    def emit(self, bridge_url: str, event: dict) -> httpx.Response:
        """POST an event at the bridge's `/wire/events`, as the sidecar does."""
        return httpx.post(
            f"{bridge_url}/wire/events", json=event, headers={"Authorization": f"Bearer {self.secret}"}, timeout=30
        )

    def wait_for_messages(self, count: int, timeout: float = 60.0) -> list[dict]:
        return _wait(lambda: self.messages, count, timeout, self)


def _wait(get: Any, count: int, timeout: float, server: _Server) -> list:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with server.lock:
            current = list(get())
        if len(current) >= count:
            return current
        time.sleep(0.05)
    raise AssertionError(f"expected {count} messages, got {len(get())}: {get()!r} errors={server.errors!r}")


# --------------------------------------------------------------------------- Roman


@dataclass
class RomanBotState:
    bot_id: str
    conversation_id: str
    token: str
    members: list[str]
    removed: bool = False
    polls: dict[str, list[str]] = field(default_factory=dict)


class FakeRoman(_Server):
    """Roman, Wire's bot proxy: pushes webhooks with its service secret; serves `/api/conversation`."""

    def __init__(self, service_secret: str) -> None:
        super().__init__()
        self.service_secret = service_secret
        self.bots: dict[str, RomanBotState] = {}
        self.messages: list[tuple[str, dict]] = []  # (bot_id, body)

    def _bot(self, headers: dict[str, str]) -> RomanBotState | None:
        auth = headers.get("Authorization", "")
        if not auth.startswith("Bearer "):
            return None
        token = auth.removeprefix("Bearer ")
        return next((b for b in self.bots.values() if b.token == token), None)

    def handle(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> tuple[int, dict]:
        if path != "/api/conversation":
            return 404, {"message": "no such endpoint"}
        bot = self._bot(headers)
        if bot is None:
            return self._unauthorised("missing, malformed or expired token")
        if bot.removed:
            return 409, {"message": "Unknown bot. This bot might be deleted by the user"}
        if method == "GET":
            return 200, {
                "id": bot.conversation_id,
                "name": "roman channel",
                "creator": bot.members[0] if bot.members else None,
                "members": [{"id": m, "status": 0, "service": None} for m in bot.members],
            }
        body = self._posted(raw)
        kind = body.get("type")
        if kind == "text":
            text = body.get("text")
            if not isinstance(text, dict) or not isinstance(text.get("data"), str) or not text["data"]:
                return self._refuse("text.data missing")
            problem = _check_mentions(text["data"], text.get("mentions") or [], qualified=False)
            if problem:
                return self._refuse(problem)
        elif kind == "poll":
            poll = body.get("poll")
            if not isinstance(poll, dict) or not isinstance(poll.get("id"), str):
                return self._refuse("poll.id missing")
            if poll.get("type") == "create":
                buttons = poll.get("buttons")
                if not isinstance(buttons, list) or not buttons or not all(isinstance(b, str) and b for b in buttons):
                    return self._refuse("poll buttons must be non-empty strings")
                text = body.get("text")
                if not isinstance(text, dict) or not isinstance(text.get("data"), str):
                    return self._refuse("poll text missing")
                with self.lock:
                    bot.polls[poll["id"]] = buttons
            elif poll.get("type") == "confirmation":
                if poll["id"] not in bot.polls:
                    return self._refuse("confirmation of an unknown poll")
                if not isinstance(poll.get("offset"), int) or not 0 <= poll["offset"] < len(bot.polls[poll["id"]]):
                    return self._refuse("confirmation offset out of range")
                if not isinstance(poll.get("userId"), str) or "@" in poll["userId"]:
                    return self._refuse("confirmation userId is not a bare id")
            else:
                return self._refuse("unknown poll type")
        else:
            return self._refuse(f"unknown message type {kind!r}")
        message_id = str(uuid.uuid4())
        with self.lock:
            self.messages.append((bot.bot_id, body))
        return 200, {"messageId": message_id}

    # ----------------------------------------------------------------- pushes at the bridge

    def emit(self, bridge_url: str, push: dict) -> httpx.Response:
        return httpx.post(
            f"{bridge_url}/wire/roman",
            json=push,
            headers={"Authorization": f"Bearer {self.service_secret}"},
            timeout=30,
        )

    def add_bot(self, bridge_url: str, conversation_id: str, members: list[str], name: str = "roman channel") -> str:
        """Create a bot in `conversation_id` (bare ids) and push its `conversation.bot_request`."""
        bot_id = self.new_bot(conversation_id, members)
        response = self.emit(bridge_url, self.bot_request(bot_id, name))
        assert response.status_code == 200, response.text
        return bot_id

    def new_bot(self, conversation_id: str, members: list[str]) -> str:
        """A bot Roman knows in `conversation_id` (bare ids), not yet announced to the bridge."""
        bot = RomanBotState(str(uuid.uuid4()), conversation_id, f"tok-{uuid.uuid4().hex}", list(members))
        self.bots[bot.bot_id] = bot
        return bot.bot_id

    def _push(self, kind: str, bot_id: str, **fields: object) -> dict:
        """A push of type `conversation.<kind>` from bot `bot_id` in its conversation."""
        return {
            "type": f"conversation.{kind}",
            "botId": bot_id,
            "conversationId": self.bots[bot_id].conversation_id,
            **fields,
        }

    def bot_request(self, bot_id: str, name: str = "roman channel") -> dict:
        bot = self.bots[bot_id]
        return self._push(
            "bot_request",
            bot_id,
            userId=bot.members[0],
            conversation=name,
            handle="alice",
            locale="en_GB",
            token=bot.token,
        )

    def new_text(
        self, bot_id: str, user: str, message_id: str, text: str, mentions: list[tuple[str, int, int]] = ()
    ) -> dict:
        return self._push(
            "new_text",
            bot_id,
            userId=user,
            messageId=message_id,
            token="short-lived",
            text={"data": text, "mentions": [{"userId": u, "offset": o, "length": n} for u, o, n in mentions]},
        )

    def poll_action(self, bot_id: str, user: str, poll_id: str, offset: int) -> dict:
        return self._push(
            "poll.action",
            bot_id,
            userId=user,
            messageId=str(uuid.uuid4()),
            token=self.bots[bot_id].token,
            poll={"id": poll_id, "offset": offset},
        )

    def remove_bot(self, bridge_url: str, bot_id: str) -> httpx.Response:
        self.bots[bot_id].removed = True
        return self.emit(bridge_url, self._push("bot_removed", bot_id))

    def wait_for_messages(self, count: int, timeout: float = 60.0) -> list[tuple[str, dict]]:
        return _wait(lambda: self.messages, count, timeout, self)
