"""Secrets at rest: Roman tokens under MultiFernet over JEEVES_ENCRYPTION_KEYS (first encrypts, all decrypt),
independent of DJANGO_SECRET_KEY, re-encrypted by `jeeves rotate-keys`."""

from __future__ import annotations

import base64
import hashlib
import io
import uuid

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

from ground.config import ConfigError, load
from knowledge import channels
from knowledge.models import RomanBot
from tests.wire_bridge.conftest import wire_config
from wire_bridge import auth

pytestmark = pytest.mark.django_db

OLD, NEW = Fernet.generate_key().decode(), Fernet.generate_key().decode()


def keys(*k: str):
    return override_settings(JEEVES=wire_config(encryption_keys=k))


def test_tokens_outlive_a_new_django_secret_key():
    with keys(OLD), override_settings(SECRET_KEY="the-first-secret-key"):
        stored = auth.encrypt_token("lifelong-roman-token")
    with keys(OLD), override_settings(SECRET_KEY="a-rotated-secret-key"):
        assert auth.decrypt_token(stored) == "lifelong-roman-token"


def test_the_first_key_encrypts_every_key_decrypts_and_rotate_keys_moves_all_to_the_first():
    bot = str(uuid.uuid4())
    with keys(OLD):
        channels.store_roman_bot(bot, None, auth.encrypt_token("token-under-the-old-key"))
    with keys(NEW, OLD):
        assert auth.decrypt_token(RomanBot.objects.get(bot_id=bot).token_ciphertext) == "token-under-the-old-key"
        out = io.StringIO()
        call_command("jeeves", "rotate-keys", stdout=out)
        assert "Re-encrypted 1 Roman bot token" in out.getvalue()
    with keys(NEW), override_settings(SECRET_KEY="another"):
        assert auth.decrypt_token(RomanBot.objects.get(bot_id=bot).token_ciphertext) == "token-under-the-old-key"


def test_a_token_stored_before_the_keys_existed_is_read_and_rotated(settings):
    # The old scheme: a key derived from DJANGO_SECRET_KEY by a hash.
    digest = hashlib.sha256(b"jeeves.roman-bot-token:" + settings.SECRET_KEY.encode()).digest()
    legacy = Fernet(base64.urlsafe_b64encode(digest)).encrypt(b"legacy-token").decode()
    bot = str(uuid.uuid4())
    channels.store_roman_bot(bot, None, legacy)
    with keys(NEW):
        call_command("jeeves", "rotate-keys", stdout=io.StringIO())
    with keys(NEW), override_settings(SECRET_KEY="no-longer-the-same"):
        assert auth.decrypt_token(RomanBot.objects.get(bot_id=bot).token_ciphertext) == "legacy-token"


def test_a_token_no_key_opens_is_named_not_lost():
    bot = str(uuid.uuid4())
    channels.store_roman_bot(bot, None, Fernet(Fernet.generate_key()).encrypt(b"x").decode())
    with keys(NEW), pytest.raises(CommandError, match=bot):
        call_command("jeeves", "rotate-keys", stdout=io.StringIO())
    assert RomanBot.objects.filter(bot_id=bot).exists()


def test_a_bad_key_is_named_by_position_never_echoed():
    with pytest.raises(ConfigError) as caught:
        load({"JEEVES_ENCRYPTION_KEYS": f"{NEW},not-a-fernet-key-secret-value"})
    assert "key 2 of 2" in str(caught.value) and "not-a-fernet-key-secret-value" not in str(caught.value)
    assert load({"JEEVES_ENCRYPTION_KEYS": f" {NEW} , {OLD} "}).encryption_keys == (NEW, OLD)
