"""`jeeves replay --reset` (and `jeeves eval`) forget the bridge's once-only markers of the channel, so a
second replay within their TTL still honours its `@jeeves pause` instead of skipping it as a redelivery."""

from __future__ import annotations

import pytest

from ground import keys as key_families
from jeeves.management.commands import jeeves_replay as replay

pytestmark = pytest.mark.django_db


def test_reset_forgets_the_channels_seen_and_replied_markers(redis_client):
    mine, other = (
        "c0ffee00-0000-4000-8000-000000000001@wire.example",
        "c0ffee00-0000-4000-8000-000000000002@wire.example",
    )
    keys = {
        family.key(cid, f"m{n:03d}"): cid
        for family in (key_families.SEEN, key_families.REPLIED)
        for cid in (mine, other)
        for n in range(3)
    }
    for key in keys:
        redis_client.set(key, 1, ex=60)
    try:
        replay._reset(mine)
        assert {k for k in keys if redis_client.exists(k)} == {k for k, cid in keys.items() if cid == other}
    finally:
        redis_client.delete(*keys)


def test_a_refused_event_names_the_bridges_reason():
    """A conversation the bridge will not take (here an event missing its fields) stops the replay with the
    bridge's one-line reason (the field and the fault, never a value), not a bare status code."""
    import httpx
    from django.conf import settings
    from django.core.handlers.wsgi import WSGIHandler
    from django.core.management.base import CommandError

    cfg = settings.JEEVES
    replayer = replay.Replayer("http://testserver", cfg.wire_secret, cfg.wire_app_id, 5.0, quiet=True)
    replayer.client = httpx.Client(
        transport=httpx.WSGITransport(app=WSGIHandler()),
        base_url="http://testserver",
        headers={"Authorization": f"Bearer {cfg.wire_secret}"},
    )
    with pytest.raises(CommandError, match=r"answered 400 to a text_message event: invalid event: \S+"):
        replayer._post({"type": "text_message"})
