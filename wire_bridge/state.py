"""Consent state at the edge: apply a state command and, on secure, forget what rests in Redis at once."""

from __future__ import annotations

from django.dispatch import receiver

from ground import keys
from ground.redis import delete_matching
from knowledge import channels
from knowledge.models import ChannelState
from pipeline import window
from wire_bridge.commands import Kind

_TARGET: dict[Kind, ChannelState] = {
    Kind.PAUSE: ChannelState.PAUSED,
    Kind.RESUME: ChannelState.ACTIVE,
    Kind.SECURE_OFF: ChannelState.ACTIVE,
    Kind.SECURE: ChannelState.SECURE,
}


def apply(channel_id: str, kind: Kind, *, by: str) -> str:
    """Apply a state command; returns the outcome the reply is worded from.

    paused | already_paused | still_secure | secure | already_secure | active | already_active
    """
    transition = channels.set_state(channel_id, _TARGET[kind], by=by)  # flushes on secure (below)
    if kind == Kind.PAUSE:
        if transition.current == ChannelState.SECURE:
            return "still_secure"
        return "paused" if transition.changed else "already_paused"
    if kind == Kind.SECURE:
        return "secure" if transition.changed else "already_secure"
    return "active" if transition.changed else "already_active"


@receiver(channels.state_changed)
def _flush_on_secure(sender, channel_id: str, transition: channels.Transition, **kwargs) -> None:
    """Whoever changed the state (a command, a button, the admin): in secure mode Redis forgets the
    channel's window and pending text at once. After the change committed: whatever was admitted
    before it is in Redis by now (admissions hold a share lock the change waited for)."""
    if transition.current == ChannelState.SECURE:
        forget_recent(channel_id)


def forget_recent(channel_id: str) -> None:
    """Flush the channel's window and delete its pending claim-check text (docs/guarantees.md §3)."""
    window.flush(channel_id)
    purge_pending_text(channel_id)


def purge_pending_text(channel_id: str) -> int:
    return delete_matching(keys.CLAIM_CHECK.pattern(channel_id))
