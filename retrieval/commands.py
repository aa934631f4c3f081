"""Commands that read the knowledge, for the bridge's command router (run on the `respond` queue).

Each returns the reply text in Jeeves' voice. The bridge sends it through its outbound client.
"""

from __future__ import annotations

INTERIM = "I'm afraid that particular service is still being arranged. Shall I attend to it as soon as it is ready?"


def answer_question(channel_id: str, user_id: str, question: str) -> str:
    return INTERIM


def list_decisions(channel_id: str, user_id: str) -> str:
    return INTERIM


def list_actions(channel_id: str, user_id: str, mine: bool) -> str:
    return INTERIM


def channel_status(channel_id: str, user_id: str) -> str:
    return INTERIM


def mark_action_done(channel_id: str, user_id: str, friendly_id: str) -> str:
    return INTERIM


def supersede_decision(channel_id: str, user_id: str, old_friendly_id: str, new_friendly_id: str) -> str:
    return INTERIM


def catch_me_up(channel_id: str, user_id: str) -> str:
    return INTERIM
