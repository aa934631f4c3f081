"""Authentication at the Wire edge: bearer checks on pushes, and Roman bot tokens encrypted at rest
(MultiFernet over JEEVES_ENCRYPTION_KEYS, shared by every service)."""

from __future__ import annotations

import base64
import hashlib
import hmac
from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.http import HttpRequest


def bearer_ok(request: HttpRequest, secret: str) -> bool:
    """True when the request carries `Authorization: Bearer <secret>` (constant-time; an unset secret admits nobody)."""
    # META directly: request.headers builds a mapping of every header first.
    scheme, _, token = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
    if not secret or scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(token.strip().encode("utf-8", "replace"), secret.encode("utf-8"))


@lru_cache(maxsize=4)
def _cipher(keys: tuple[str, ...], secret_key: str) -> MultiFernet:
    """The first of JEEVES_ENCRYPTION_KEYS encrypts, all of them decrypt. Tokens stored before these
    keys existed (a key derived from DJANGO_SECRET_KEY) still decrypt, last, until `jeeves rotate-keys`."""
    fernets = [Fernet(k.encode("ascii")) for k in keys]
    if secret_key:
        digest = hashlib.sha256(b"jeeves.roman-bot-token:" + secret_key.encode("utf-8")).digest()
        fernets.append(Fernet(base64.urlsafe_b64encode(digest)))
    return MultiFernet(fernets)


def _current() -> MultiFernet:
    return _cipher(settings.JEEVES.encryption_keys, settings.SECRET_KEY)


def encrypt_token(token: str) -> str:
    return _current().encrypt(token.encode("utf-8")).decode("ascii")


def decrypt_token(ciphertext: str) -> str | None:
    """The token, or None when none of the keys opens it."""
    try:
        return _current().decrypt(ciphertext.encode("ascii")).decode("utf-8")
    except (InvalidToken, ValueError):
        return None


def rotate_token(ciphertext: str) -> str | None:
    """The ciphertext re-encrypted under the first key; None when none of the keys opens it."""
    try:
        return _current().rotate(ciphertext.encode("ascii")).decode("ascii")
    except (InvalidToken, ValueError):
        return None
