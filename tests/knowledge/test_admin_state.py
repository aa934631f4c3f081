"""The admin changes a channel's state only through the state service, like the commands: secure mode
from the admin bumps the epoch, opens a secure range and flushes the window and pending text at once."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from django.contrib.auth.models import User

from knowledge.models import ChannelConfig
from pipeline import claimcheck, window

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client):
    client.force_login(User.objects.create_superuser(f"ops-{uuid.uuid4().hex[:6]}", password="pw"))
    return client


@pytest.fixture
def channel() -> ChannelConfig:
    ch = ChannelConfig.objects.create(channel_id=f"{uuid.uuid4()}@wire.example", organisation_id="wire.example")
    at = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
    window.push(ch.channel_id, window.WindowMessage("m1", "u@wire.example", at, "the launch date is a secret"))
    claimcheck.park(ch.channel_id, "m1", "the launch date is a secret")
    return ch


def test_secure_mode_from_the_admin_takes_the_same_door_as_the_command(admin_client, channel):
    response = admin_client.post(
        "/admin/knowledge/channelconfig/",
        {"action": "secure_mode", "_selected_action": [channel.channel_id]},
    )
    assert response.status_code == 302
    channel.refresh_from_db()
    assert (channel.state, channel.epoch) == ("secure", 1)
    assert channel.secure_ranges[0]["end"] is None and channel.state_changed_by.startswith("admin:")
    assert window.read(channel.channel_id) == []
    assert claimcheck.claim(claimcheck.key_for(channel.channel_id, "m1")) is None

    admin_client.post(
        "/admin/knowledge/channelconfig/", {"action": "secure_mode_off", "_selected_action": [channel.channel_id]}
    )
    channel.refresh_from_db()
    assert channel.state == "active" and channel.secure_ranges[0]["end"] is not None


def test_the_change_form_cannot_set_the_state(admin_client, channel):
    url = f"/admin/knowledge/channelconfig/{channel.channel_id}/change/"
    form = {
        "channel_name": "renamed", "state": "secure", "timezone": "UTC", "locale": "en",
        "purpose": "x" * 2000, "tags": "", "stakeholders": "", "related_channels": "", "context_type": "",
    }  # fmt: skip
    response = admin_client.post(url, form)
    assert response.status_code == 302, response.content[:2000]
    channel.refresh_from_db()
    assert (channel.channel_name, channel.state, channel.epoch) == ("renamed", "active", 0)
    assert len(channel.purpose) == 500  # bounded like a `context:` command
    assert window.read(channel.channel_id) != []  # nothing flushed: nothing changed state
    window.flush(channel.channel_id)
