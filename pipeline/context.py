"""What the pipeline knows about a channel when it classifies or extracts: purpose, members, timezone.

Built by the caller (tasks) from channel_config and the Redis member cache; pure data here.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.members import Member


def _norm(text: str) -> str:
    return " ".join(text.casefold().split())


@dataclass(frozen=True)
class ChannelContext:
    channel_id: str
    organisation_id: str
    name: str | None
    purpose: str | None
    context_type: str | None
    tags: tuple[str, ...]
    timezone: str  # IANA
    members: tuple[Member, ...]
    bot_ids: tuple[str, ...]  # qualified ids of Jeeves itself
    known_entities: tuple[str, ...]

    def member_by_handle(self, handle: str) -> Member | None:
        """The member whose Wire handle is `handle` (with or without a leading @), case-insensitive."""
        wanted = handle.strip().lstrip("@").casefold()
        if not wanted:
            return None
        for member in self.members:
            if member.handle and member.handle.casefold() == wanted:
                return member
        return None

    def member_by_name(self, text: str) -> Member | None:
        """The member called `text`: full display name first, then a unique first-name match."""
        wanted = _norm(text)
        if not wanted:
            return None
        for member in self.members:
            if member.name and _norm(member.name) == wanted:
                return member
        # A first name only counts when it names exactly one member; two Sams are ambiguous.
        first = [m for m in self.members if m.name and _norm(m.name).split(" ")[0] == wanted]
        return first[0] if len(first) == 1 else None

    def member_called(self, word: str) -> Member | None:
        """The member one word calls: their name (`member_by_name`), else the one member whose name has that word
        in another place ("Huy" for "Bùi Đức Huy", whose given name comes last), else their handle."""
        if found := self.member_by_name(word):
            return found
        wanted = _norm(word)
        named = [m for m in self.members if m.name and wanted in _norm(m.name).split(" ")[1:]]
        return named[0] if len(named) == 1 else self.member_by_handle(word)

    def display_name(self, user_id: str) -> str:
        """A human name for `user_id`: display name, else @handle, else the bare id."""
        for member in self.members:
            if member.user_id == user_id:
                if member.name:
                    return member.name
                if member.handle:
                    return f"@{member.handle}"
                break
        return user_id.partition("@")[0] or user_id
