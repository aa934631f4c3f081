"""Questions per person per minute (JEEVES_QUESTIONS_PER_MINUTE): each may call a model, so past the limit the
asker gets a polite "one moment" instead of an answer, in any channel; other people are not affected."""

from __future__ import annotations

import uuid

import pytest
from django.test import override_settings

from ground import keys
from tests.wire_bridge.conftest import wire_config
from wire_bridge import replies
from wire_bridge.commands import Command, Kind
from wire_bridge.respond import build_reply

pytestmark = pytest.mark.django_db


def test_a_person_over_the_question_limit_is_asked_to_wait_and_others_are_not(redis_client):
    asker, other = f"{uuid.uuid4()}@wire.example", f"{uuid.uuid4()}@wire.example"
    channel = f"{uuid.uuid4()}@wire.example"
    question = Command(Kind.QUESTION, argument="what did we settle about the retry budget?")
    try:
        with override_settings(JEEVES=wire_config(questions_per_minute=2)):
            answers = [build_reply(channel, asker, f"q{n}", question, []).text for n in range(3)]
            assert answers[0] != replies.TOO_MANY_QUESTIONS and answers[1] != replies.TOO_MANY_QUESTIONS
            assert answers[2] == replies.TOO_MANY_QUESTIONS
            assert build_reply(channel, other, "q9", question, []).text != replies.TOO_MANY_QUESTIONS
            assert 0 < redis_client.ttl(keys.QUESTIONS.key(asker)) <= 60
    finally:
        redis_client.delete(keys.QUESTIONS.key(asker), keys.QUESTIONS.key(other))
