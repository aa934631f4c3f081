"""`jeeves rotate-keys`: re-encrypt every secret Jeeves stores under the first of JEEVES_ENCRYPTION_KEYS.

Rotation: put the new key first (`JEEVES_ENCRYPTION_KEYS=new,old`) on every service, restart them, run
this, then drop the old key. Tokens stored before JEEVES_ENCRYPTION_KEYS existed are re-encrypted too.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = "Re-encrypt stored secrets (Roman bot tokens) under the first key of JEEVES_ENCRYPTION_KEYS."
    requires_system_checks: list[str] = []

    def handle(self, *args: Any, **options: Any) -> None:
        from knowledge import channels
        from wire_bridge import auth

        rotated, unreadable = 0, []
        for bot_id, ciphertext in channels.roman_tokens():
            fresh = auth.rotate_token(ciphertext)
            if fresh is None:
                unreadable.append(bot_id)
            elif channels.replace_roman_token(bot_id, ciphertext, fresh):
                rotated += 1
        self.stdout.write(f"Re-encrypted {rotated} Roman bot token(s) under the first key.")
        if unreadable:
            raise CommandError(
                f"{len(unreadable)} token(s) open with none of the keys (bots {', '.join(unreadable)}): "
                "add the key they were stored under to JEEVES_ENCRYPTION_KEYS, or re-add those bots"
            )
