"""RetrievalScope: what one asker may see, expressed as SQL predicates that every path embeds in its query.

A channel sees its own records. A 1:1 conversation (`is_personal`: Wire's conversation type, persisted)
sees the organisation, but only records the asking user authored, owns or decided. A channel Jeeves
has left (waiting for its purge) is outside every scope: asking there finds nothing, and a 1:1 never
reaches its records. Scope is decided here from channel_config, never by a model, and never applied
to results after the fact (docs/guarantees.md §2).
"""

from __future__ import annotations

from dataclasses import dataclass

from knowledge.models import ChannelConfig


class UnknownChannel(LookupError):
    """Jeeves was never added to the channel, or has left it."""


@dataclass(frozen=True)
class RetrievalScope:
    organisation_id: str
    channel_id: str
    user_id: str
    personal: bool = False
    timezone: str = "UTC"  # the asking channel's, for the dates an answer speaks

    @classmethod
    def for_asker(cls, channel_id: str, user_id: str) -> RetrievalScope:
        row = (
            ChannelConfig.objects.filter(channel_id=channel_id, left_at__isnull=True)
            .values("organisation_id", "is_personal", "timezone")
            .first()
        )
        if row is None:
            raise UnknownChannel(channel_id)
        return cls(
            organisation_id=row["organisation_id"],
            channel_id=channel_id,
            user_id=user_id,
            personal=row["is_personal"],
            timezone=row["timezone"] or "UTC",
        )

    def params(self) -> dict[str, str]:
        return {"scope_org": self.organisation_id, "scope_channel": self.channel_id, "scope_user": self.user_id}

    # Each predicate takes the table alias and uses only the named parameters of `params()`.
    # Array membership is written `col @> ARRAY[x]` (same rows as `x = ANY(col)`) so the GIN indexes serve it.
    # In a channel scope the channel is the access path and the organisation a guard, written
    # `IS NOT DISTINCT FROM` (the same test on these NOT NULL columns) so that no index on organisation_id
    # is AND-ed with the channel's: the planner underestimates that AND, and a bitmap of a whole
    # organisation's rows costs ~40 ms at 100k embeddings, against ~2 ms for the channel's own rows.

    @staticmethod
    def _org_guard(a: str) -> str:
        return f"{a}.organisation_id IS NOT DISTINCT FROM %(scope_org)s"

    @staticmethod
    def _present(a: str) -> str:
        # A 1:1 reaches across the organisation's channels, but never into one Jeeves has left.
        return (
            f"NOT EXISTS (SELECT 1 FROM channel_config lc WHERE lc.channel_id = {a}.channel_id"
            " AND lc.left_at IS NOT NULL)"
        )

    def _scoped(self, a: str, personal: str, channel: str) -> str:
        """Table `a`'s predicate: in a 1:1, the organisation's rows that `personal` admits; in a channel, the
        rows that `channel` admits, the organisation a guard."""
        if self.personal:
            return f"({a}.organisation_id = %(scope_org)s AND {personal})"
        return f"({self._org_guard(a)} AND {channel})"

    def _records(self, a: str, mine: str) -> str:
        """A record table's predicate: in a channel, its own records; in a 1:1, the organisation's records
        that `mine` says are the asker's, never of a channel Jeeves has left."""
        return self._scoped(a, f"{mine} AND {self._present(a)}", f"{a}.channel_id = %(scope_channel)s")

    def decisions(self, a: str) -> str:
        return self._records(a, f"{a}.decided_by @> ARRAY[%(scope_user)s]::text[]")

    def actions(self, a: str) -> str:
        return self._records(a, f"{a}.owner_id = %(scope_user)s")

    def signals(self, a: str) -> str:
        return self._records(a, f"{a}.participants @> ARRAY[%(scope_user)s]::text[]")

    def embeddings(self, a: str) -> str:
        return self._records(a, f"{a}.author_id = %(scope_user)s")

    def summaries(self, a: str) -> str:
        # A channel summary retells everybody's words; in a 1:1 only the asker's own person summaries qualify,
        # and none that retells a record of a channel Jeeves has left.
        return self._scoped(
            a,
            f"{a}.scope_type = 'person' AND {a}.scope_id = %(scope_user)s"
            " AND NOT EXISTS (SELECT 1 FROM channel_config lc WHERE lc.left_at IS NOT NULL AND lc.channel_id IN ("
            f"SELECT sd.channel_id FROM decisions sd WHERE sd.id = ANY({a}.key_decisions)"
            f" UNION ALL SELECT sa.channel_id FROM actions sa WHERE sa.id = ANY({a}.key_actions)))",
            f"{a}.scope_type = 'channel' AND {a}.scope_id = %(scope_channel)s",
        )

    def entities(self, a: str) -> str:
        # In a 1:1, the asker's entities: those linked from signals the asker took part in.
        return self._scoped(
            a,
            f"NOT {a}.deleted AND {a}.id IN ("
            "SELECT unnest(s.related_entities) FROM conversation_signals s"
            " WHERE s.organisation_id = %(scope_org)s AND s.participants @> ARRAY[%(scope_user)s]::text[]"
            f" AND {self._present('s')})",
            f"NOT {a}.deleted AND {a}.channel_ids @> ARRAY[%(scope_channel)s]::text[]",
        )

    def relationships(self, a: str) -> str:
        # In a 1:1 the endpoints are scoped by `entities` in the same query; the link itself must rest on a
        # present channel.
        return self._scoped(
            a,
            f"EXISTS (SELECT 1 FROM channel_config rc WHERE rc.channel_id = ANY({a}.channel_ids)"
            " AND rc.left_at IS NULL)",
            f"{a}.channel_ids @> ARRAY[%(scope_channel)s]::text[]",
        )
