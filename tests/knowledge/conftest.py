"""What the knowledge tests share: a channel, a moment, a message."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from knowledge.models import ChannelConfig

T0 = datetime(2026, 3, 2, 9, 20, tzinfo=UTC)
MESSAGE = "right then, we settle on nightly snapshots kept for thirty days in cold storage from April"


@pytest.fixture
def channel(db):
    return ChannelConfig.objects.create(channel_id="c1@wire.example", organisation_id="wire.example")
