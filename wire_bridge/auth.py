"""Authentication at the Wire edge: bearer checks on pushes, and Roman bot tokens encrypted at rest."""

from __future__ import annotations

import base64
import hashlib
import hmac
from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings
from django.http import HttpRequest


def bearer_ok(request: HttpRequest, secret: str) -> bool:
    """True when the request carries `Authorization: Bearer <secret>` (constant-time; an unset secret admits nobody)."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if not secret or scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(token.strip().encode("utf-8", "replace"), secret.encode("utf-8"))


@lru_cache(maxsize=4)
def _fernet(secret_key: str) -> Fernet:
    # A key of its own, derived from DJANGO_SECRET_KEY, so the token cipher never reuses the signing key.
    digest = hashlib.sha256(b"jeeves.roman-bot-token:" + secret_key.encode("utf-8")).digest()
    return Fernet(base64.urlsafe_b64encode(digest))


def encrypt_token(token: str) -> str:
    return _fernet(settings.SECRET_KEY).encrypt(token.encode("utf-8")).decode("ascii")


def decrypt_token(ciphertext: str) -> str | None:
    """The token, or None when it was encrypted under another DJANGO_SECRET_KEY."""
    try:
        return _fernet(settings.SECRET_KEY).decrypt(ciphertext.encode("ascii")).decode("utf-8")
    except (InvalidToken, ValueError):
        return None
