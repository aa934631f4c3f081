"""The knowledge schema (docs/architecture.md §5). No column anywhere holds raw message text.

Text columns (`summary`, `description`, `rationale`, `context`) hold synthesised restatements
written by knowledge/records.py and knowledge/entities.py, which guard against verbatim runs.
`source_ref` points back to Wire message ids and a time range, never to content:
    {"wire_msg_ids": ["..."], "timestamp_range": {"start": iso, "end": iso}}
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.functions import RandomUUID
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.db import models
from django.db.models import Q, Value
from django.db.models.functions import Now
from pgvector.django import HnswIndex, VectorField


def _text_array() -> ArrayField:
    return ArrayField(models.TextField(), default=list, blank=True, db_default=Value("{}"))


def _uuid_pk() -> models.UUIDField:
    return models.UUIDField(primary_key=True, default=uuid.uuid4, db_default=RandomUUID(), editable=False)


def _source_key() -> models.TextField:
    return models.TextField(help_text="Natural key for idempotent writes (from the source message ids)")


def _restatement() -> models.JSONField:
    """What a record's stored text keeps of its messages, measured when written (the text is gone after):
    {"kept_share": largest share of one message's words kept in order, "longest_run": words, ...}."""
    return models.JSONField(default=dict, blank=True)


def _search_vector(*columns: str) -> models.GeneratedField:
    # to_tsvector with an explicit config is immutable, so Postgres can store it (GENERATED ... STORED).
    return models.GeneratedField(
        expression=SearchVector(*columns, config="english"),
        output_field=SearchVectorField(),
        db_persist=True,
    )


# A choice's label is Django's (its member name, title-cased: OPEN → "Open") unless it says more.
class ChannelState(models.TextChoices):
    ACTIVE = "active"
    PAUSED = "paused"
    SECURE = "secure"


class ConversationType(models.TextChoices):
    GROUP = "GROUP"
    ONE_TO_ONE = "ONE_TO_ONE", "One to one"
    UNKNOWN = "UNKNOWN", "Unknown (treated as a group)"


class ChannelQuerySet(models.QuerySet):
    def active(self) -> ChannelQuerySet:
        """The channels Jeeves works in: active (neither paused nor secure) and not left (`is_active`)."""
        return self.filter(state=ChannelState.ACTIVE, left_at__isnull=True)


class ChannelConfig(models.Model):
    """One Wire conversation Jeeves sits in, its consent state and its context."""

    channel_id = models.TextField(primary_key=True, help_text='"{conversationId}@{domain}"')
    channel_name = models.TextField(null=True, blank=True)
    organisation_id = models.TextField(help_text="Wire domain of the conversation")
    transport = models.TextField(
        default="sidecar", db_default="sidecar", choices=[("sidecar", "Sidecar (Wire Apps SDK)"), ("roman", "Roman")]
    )
    conversation_type = models.TextField(
        default=ConversationType.UNKNOWN,
        db_default=ConversationType.UNKNOWN,
        choices=ConversationType.choices,
        help_text="Wire's word (app_added, Roman's conversation data); unknown is a group",
    )
    state = models.TextField(choices=ChannelState.choices, default=ChannelState.ACTIVE, db_default="active")
    state_changed_at = models.DateTimeField(null=True, blank=True)
    state_changed_by = models.TextField(null=True, blank=True)
    epoch = models.IntegerField(default=0, db_default=0, help_text="Bumped on secure: in-flight tasks drop")
    # Derived by the database from Wire's conversation type, never written: a lost member cache
    # cannot turn a group into a 1:1 (docs/guarantees.md §2).
    is_personal = models.GeneratedField(
        expression=Q(conversation_type="ONE_TO_ONE"),
        output_field=models.BooleanField(),
        db_persist=True,
        help_text="A 1:1, as Wire's conversation type says",
    )
    purpose = models.TextField(null=True, blank=True)
    context_type = models.TextField(
        null=True,
        blank=True,
        choices=[("customer", "Customer"), ("project", "Project"), ("team", "Team"), ("general", "General")],
    )
    tags = _text_array()
    stakeholders = _text_array()
    related_channels = _text_array()
    context_updated_at = models.DateTimeField(null=True, blank=True)
    context_updated_by = models.TextField(null=True, blank=True)
    secure_ranges = models.JSONField(default=list, db_default=[], blank=True, help_text="[{start, end}]")
    timezone = models.TextField(default="UTC", db_default="UTC")
    locale = models.TextField(default="en", db_default="en")
    joined_at = models.DateTimeField(db_default=Now())
    left_at = models.DateTimeField(null=True, blank=True, help_text="Set when Jeeves was removed")

    objects = ChannelQuerySet.as_manager()

    class Meta:
        db_table = "channel_config"
        verbose_name = "channel"
        indexes = [models.Index(fields=["organisation_id"], name="channel_config_org_idx")]

    def __str__(self) -> str:
        return self.channel_name or self.channel_id

    @property
    def is_active(self) -> bool:
        return self.state == ChannelState.ACTIVE and self.left_at is None


def _link(
    to: type[models.Model] | str,
    column: str,
    *,
    optional: bool = False,
    on_delete=models.CASCADE,
    related_name: str = "+",
    **extra: object,
) -> models.ForeignKey:
    """A row's link to a row of `to`, in `column`; `optional`: it may have none. Deleting the row linked to
    deletes this one unless `on_delete` says otherwise; no reverse accessor unless `related_name` names one."""
    return models.ForeignKey(
        to, on_delete=on_delete, db_column=column, related_name=related_name, null=optional, blank=optional, **extra
    )


def _channel() -> models.ForeignKey:
    """The channel a row belongs to (column channel_id); deleting the channel deletes the row."""
    return _link(ChannelConfig, "channel_id")


class ExtractedRecord(models.Model):
    """The columns of every record Tier 2 extracts from a channel's messages (a decision, an action, a signal):
    its channel, tags, the messages it rests on (`source_ref`, `source_key`: ids, never text), the model that
    extracted it and what its text keeps of them (`restatement`). Each kind's own columns follow these."""

    id = _uuid_pk()
    channel = _channel()
    organisation_id = models.TextField()
    tags = _text_array()
    source_ref = models.JSONField()
    source_key = _source_key()
    extraction_model = models.TextField(null=True, blank=True)
    restatement = _restatement()
    created_at = models.DateTimeField(db_default=Now())

    class Meta:
        abstract = True


class NumberedRecord(ExtractedRecord):
    """A decision or an action: numbered per channel (`friendly_id`, DEC-0007 / ACT-0012, each kind its own
    column) and judged by the prompt that extracted it; its own columns follow these."""

    confidence = models.FloatField(default=0.8, db_default=0.8)
    prompt_version = models.TextField(null=True, blank=True)

    class Meta:
        abstract = True


def _one_per_source(prefix: str) -> models.UniqueConstraint:
    """An extracted record table's idempotency: one row per source in a channel (named after the table)."""
    return models.UniqueConstraint(fields=["channel", "source_key"], name=f"{prefix}_channel_source_uniq")


def _numbered_uniques(prefix: str) -> list[models.UniqueConstraint]:
    """A numbered record table's constraints: its numbers and its sources, each once per channel."""
    friendly = models.UniqueConstraint(fields=["channel", "friendly_id"], name=f"{prefix}_channel_friendly_uniq")
    return [friendly, _one_per_source(prefix)]


def _tags_and_text_gins(prefix: str) -> list[GinIndex]:
    """An extracted record table's GIN indexes on its tags and its search vector (named after the table)."""
    return [
        GinIndex(fields=["tags"], name=f"{prefix}_tags_gin"),
        GinIndex(fields=["search_vector"], name=f"{prefix}_search_gin"),
    ]


class DecisionStatus(models.TextChoices):
    ACTIVE = "active"
    SUPERSEDED = "superseded"
    REVERSED = "reversed"
    QUESTIONED = "questioned"
    REJECTED = "rejected", "Rejected by a reviewer"


class Decision(NumberedRecord):
    """A commitment the channel made. Bi-temporal: decided_at and, once replaced, valid_until."""

    friendly_id = models.TextField(help_text="DEC-0007, unique per channel")
    summary = models.TextField()
    rationale = models.TextField(null=True, blank=True)
    decided_by = _text_array()
    decided_at = models.DateTimeField()
    valid_until = models.DateTimeField(null=True, blank=True)
    status = models.TextField(choices=DecisionStatus.choices, default=DecisionStatus.ACTIVE, db_default="active")
    superseded_by = _link("self", "superseded_by", optional=True, on_delete=models.SET_NULL)
    reviewed_at = models.DateTimeField(null=True, blank=True)
    reviewed_by = models.TextField(null=True, blank=True)
    search_vector = _search_vector("summary", "rationale")

    class Meta:
        db_table = "decisions"
        constraints = _numbered_uniques("decisions")
        indexes = [
            models.Index(fields=["channel", "-decided_at"], name="decisions_channel_decided_idx"),
            models.Index(fields=["status"], name="decisions_active_idx", condition=Q(status="active")),
            models.Index(fields=["organisation_id", "-decided_at"], name="decisions_org_decided_idx"),
            GinIndex(fields=["decided_by"], name="decisions_decided_by_gin"),
            *_tags_and_text_gins("decisions"),
        ]

    def __str__(self) -> str:
        return f"{self.friendly_id}: {self.summary[:60]}"


class ConflictVerdict(models.TextChoices):
    CONTRADICTS = "contradicts"
    SUPERSEDES = "supersedes", "Replaces"
    COMPATIBLE = "compatible"


class ConflictStatus(models.TextChoices):
    COMPATIBLE = "compatible", "Judged compatible: nothing to raise"
    HELD = "held", "Held until both decisions are 30 minutes old"
    RAISED = "raised", "Raised in the channel"
    SUPERSEDED = "superseded", "The older was marked superseded by the newer"
    KEPT = "kept", "Both kept"
    DISMISSED = "dismissed"
    WITHDRAWN = "withdrawn", "One of them changed before it was raised: never raised"


class DecisionConflict(models.Model):
    """A pair of decisions of one channel, judged once after the newer was recorded (docs/architecture.md §8).

    At most one row per pair (`older`, `newer`): a pair is judged, held, raised and answered once.
    `reason` is the judge's one-line synthesised reason, never message text.
    """

    id = models.BigAutoField(primary_key=True)
    channel = _channel()
    organisation_id = models.TextField()
    older = _link(Decision, "older_id")
    newer = _link(Decision, "newer_id")
    verdict = models.TextField(choices=ConflictVerdict.choices)
    stated = models.BooleanField(
        default=False, db_default=False, help_text="The team said the newer replaces the older"
    )
    score = models.FloatField(help_text="The judge's confidence in its verdict (0..1)")
    cosine = models.FloatField(null=True, blank=True, help_text="Similarity of the two decisions' vectors")
    reason = models.TextField(blank=True, default="", db_default="")
    judge_model = models.TextField(help_text="Model that judged the pair ('local' = the offline engine)")
    status = models.TextField(choices=ConflictStatus.choices)
    detected_at = models.DateTimeField(db_default=Now())
    raised_at = models.DateTimeField(null=True, blank=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolved_by = models.TextField(null=True, blank=True, help_text="Who answered; empty when Jeeves acted itself")

    class Meta:
        db_table = "decision_conflicts"
        constraints = [models.UniqueConstraint(fields=["older", "newer"], name="conflicts_pair_uniq")]
        indexes = [
            models.Index(fields=["status"], name="conflicts_held_idx", condition=Q(status="held")),
            models.Index(fields=["channel", "-resolved_at"], name="conflicts_channel_resolved_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.older_id} / {self.newer_id}: {self.verdict} ({self.status})"


class ActionStatus(models.TextChoices):
    OPEN = "open"
    DONE = "done"
    STALE = "stale"
    CANCELLED = "cancelled"


class Action(NumberedRecord):
    """Something someone undertook (or was asked) to do."""

    friendly_id = models.TextField(help_text="ACT-0012, unique per channel")
    description = models.TextField()
    owner_id = models.TextField(null=True, blank=True, help_text="Wire user id")
    owner_name = models.TextField(null=True, blank=True, help_text="Display name at extraction time")
    deadline = models.DateTimeField(null=True, blank=True)
    status = models.TextField(choices=ActionStatus.choices, default=ActionStatus.OPEN, db_default="open")
    staleness_at = models.DateTimeField(null=True, blank=True)
    related_decision = _link(Decision, "related_decision", optional=True, on_delete=models.SET_NULL)
    last_status_check = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    search_vector = _search_vector("description", "owner_name")

    class Meta:
        db_table = "actions"
        constraints = _numbered_uniques("actions")
        indexes = [
            models.Index(fields=["owner_id", "status"], name="actions_owner_status_idx"),
            models.Index(
                fields=["status", "staleness_at"], name="actions_open_staleness_idx", condition=Q(status="open")
            ),
            models.Index(fields=["channel", "-created_at"], name="actions_channel_created_idx"),
            *_tags_and_text_gins("actions"),
        ]

    def __str__(self) -> str:
        return f"{self.friendly_id}: {self.description[:60]}"


class EntityType(models.TextChoices):
    PERSON = "person"
    SERVICE = "service"
    PROJECT = "project"
    TEAM = "team"
    TOOL = "tool"
    CONCEPT = "concept"


class Entity(models.Model):
    """A person, service, project, team, tool or concept, shared across an organisation.

    `channel` is where it was first seen; `channel_ids` every channel that mentioned it, so a
    channel-scoped query only sees entities its own channel mentioned.
    """

    id = _uuid_pk()
    channel = _channel()
    channel_ids = _text_array()
    organisation_id = models.TextField()
    entity_type = models.TextField(choices=EntityType.choices)
    name = models.TextField()
    normalised_name = models.TextField(help_text="Lower-cased, punctuation-free name for dedup")
    aliases = _text_array()
    metadata = models.JSONField(default=dict, db_default={}, blank=True)
    first_seen = models.DateTimeField(null=True, blank=True)
    last_mentioned = models.DateTimeField(null=True, blank=True)
    mention_count = models.IntegerField(default=1, db_default=1)
    deleted = models.BooleanField(default=False, db_default=False)

    class Meta:
        db_table = "entities"
        verbose_name_plural = "entities"
        constraints = [
            models.UniqueConstraint(
                fields=["organisation_id", "entity_type", "normalised_name"],
                condition=Q(deleted=False),
                name="entities_org_type_name_uniq",
            ),
        ]
        indexes = [
            models.Index(fields=["entity_type", "name"], name="entities_type_name_idx"),
            GinIndex(fields=["aliases"], name="entities_aliases_gin"),
            GinIndex(fields=["channel_ids"], name="entities_channels_gin"),
            models.Index(fields=["organisation_id", "entity_type"], name="entities_org_type_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.entity_type})"


class EntityRelationship(models.Model):
    """An observed link between two entities; strengthens with repetition."""

    id = _uuid_pk()
    source = _link(Entity, "source_id", related_name="outgoing")
    target = _link(Entity, "target_id", related_name="incoming")
    relationship = models.TextField(
        choices=[
            ("owns", "owns"),
            ("depends_on", "depends on"),
            ("works_on", "works on"),
            ("blocks", "blocks"),
            ("reports_to", "reports to"),
        ]
    )
    organisation_id = models.TextField()
    channel_ids = _text_array()
    context = models.TextField(null=True, blank=True, help_text="Brief synthesised explanation")
    confidence = models.FloatField(default=0.7, db_default=0.7)
    first_observed = models.DateTimeField(null=True, blank=True)
    last_observed = models.DateTimeField(null=True, blank=True)
    observation_count = models.IntegerField(default=1, db_default=1)
    source_ref = models.JSONField(null=True, blank=True)

    class Meta:
        db_table = "entity_relationships"
        constraints = [
            models.UniqueConstraint(fields=["source", "target", "relationship"], name="entity_rel_uniq"),
        ]
        indexes = [
            models.Index(fields=["source", "relationship"], name="entity_rel_source_idx"),
            models.Index(fields=["target", "relationship"], name="entity_rel_target_idx"),
            GinIndex(fields=["channel_ids"], name="entity_rel_channels_gin"),
        ]


class Embedding(models.Model):
    """A vector of a record's synthesised text (or, only with JEEVES_EMBED_MESSAGES=1, a message)."""

    id = _uuid_pk()
    source_type = models.TextField(
        choices=[
            ("decision", "decision"),
            ("action", "action"),
            ("signal", "signal"),
            ("entity", "entity"),
            ("summary", "summary"),
            ("message", "message"),
        ]
    )
    source_id = models.UUIDField(null=True, blank=True)
    wire_msg_id = models.TextField(null=True, blank=True, help_text="Only for source_type=message")
    channel_id = models.TextField()
    organisation_id = models.TextField()
    author_id = models.TextField(null=True, blank=True)
    created_at = models.DateTimeField(help_text="When the source content occurred, not when it was embedded")
    topic_tags = _text_array()
    model = models.TextField(null=True, blank=True)
    embedding = VectorField(dimensions=settings.JEEVES.embed_dims)

    class Meta:
        db_table = "embeddings"
        constraints = [
            models.UniqueConstraint(
                fields=["source_type", "source_id"],
                condition=Q(source_id__isnull=False),
                name="embeddings_source_uniq",
            ),
            models.UniqueConstraint(
                fields=["channel_id", "wire_msg_id"],
                condition=Q(source_type="message"),
                name="embeddings_message_uniq",
            ),
        ]
        indexes = [
            HnswIndex(
                name="embeddings_hnsw_cosine",
                fields=["embedding"],
                m=16,
                ef_construction=64,
                opclasses=["vector_cosine_ops"],
            ),
            models.Index(fields=["channel_id", "-created_at"], name="embeddings_channel_created_idx"),
            models.Index(fields=["organisation_id", "author_id"], name="embeddings_org_author_idx"),
            GinIndex(fields=["topic_tags"], name="embeddings_tags_gin"),
        ]


class SignalType(models.TextChoices):
    DISCUSSION = "discussion"
    QUESTION = "question"
    BLOCKER = "blocker"
    UPDATE = "update"
    CONCERN = "concern"
    REFERENCE = "reference"


class ConversationSignal(ExtractedRecord):
    """A short synthesised note of what went on (1-2 sentences, never verbatim)."""

    signal_type = models.TextField(choices=SignalType.choices)
    summary = models.TextField()
    participants = _text_array()
    related_entities = ArrayField(models.UUIDField(), default=list, blank=True)
    occurred_at = models.DateTimeField()
    confidence = models.FloatField(default=0.6, db_default=0.6)
    search_vector = _search_vector("summary")

    class Meta:
        db_table = "conversation_signals"
        constraints = [_one_per_source("signals")]
        indexes = [
            models.Index(fields=["channel", "-occurred_at"], name="signals_channel_occurred_idx"),
            models.Index(fields=["signal_type", "-occurred_at"], name="signals_type_occurred_idx"),
            GinIndex(fields=["participants"], name="signals_participants_gin"),
            *_tags_and_text_gins("signals"),
        ]


class Summary(models.Model):
    """A rolling daily / weekly / on-demand summary of a scope (MVP: a channel)."""

    id = _uuid_pk()
    scope_type = models.TextField(
        choices=[("channel", "channel"), ("topic", "topic"), ("project", "project"), ("person", "person")]
    )
    scope_id = models.TextField(help_text="channel_id or entity name")
    organisation_id = models.TextField()
    period_start = models.DateTimeField()
    period_end = models.DateTimeField()
    granularity = models.TextField(choices=[("daily", "daily"), ("weekly", "weekly"), ("on_demand", "on demand")])
    summary = models.TextField()
    key_decisions = ArrayField(models.UUIDField(), default=list, blank=True)
    key_actions = ArrayField(models.UUIDField(), default=list, blank=True)
    active_topics = ArrayField(models.UUIDField(), default=list, blank=True)
    participants = _text_array()
    sentiment = models.TextField(
        null=True,
        blank=True,
        choices=[
            ("productive", "productive"),
            ("contentious", "contentious"),
            ("blocked", "blocked"),
            ("routine", "routine"),
        ],
    )
    message_count = models.IntegerField(null=True, blank=True)
    model_version = models.TextField(null=True, blank=True)
    generated_at = models.DateTimeField(db_default=Now())
    search_vector = _search_vector("summary")

    class Meta:
        db_table = "summaries"
        verbose_name_plural = "summaries"
        constraints = [
            models.UniqueConstraint(
                fields=["scope_type", "scope_id", "granularity", "period_start"], name="summaries_period_uniq"
            ),
        ]
        indexes = [
            models.Index(fields=["scope_type", "scope_id", "-period_end"], name="summaries_scope_period_idx"),
            GinIndex(fields=["search_vector"], name="summaries_search_gin"),
        ]


class MessageReceipt(models.Model):
    """That a message arrived, and how far it went. No content. Powers idempotency, counts, the audit."""

    class Outcome(models.TextChoices):
        QUEUED = "queued", "Queued for classification"
        ROUTINE = "routine", "Routine: receipt only"
        SIGNAL = "signal", "Low signal: one signal written"
        PENDING_EXTRACT = "pending_extract", "High signal: waiting for extraction"
        EXTRACTED = "extracted"
        EXPIRED = "expired", "Expired before a worker reached it"
        DROPPED = "dropped", "Dropped (channel paused/secure or epoch moved on)"
        EVICTED = "evicted", "Left the window unextracted"
        COMMAND = "command", "A command to Jeeves"

    id = models.BigAutoField(primary_key=True)
    channel_id = models.TextField()
    wire_msg_id = models.TextField()
    author_id = models.TextField(null=True, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True, help_text="The message's own timestamp")
    received_at = models.DateTimeField(db_default=Now())
    tier = models.SmallIntegerField(default=0, db_default=0, help_text="0 received, 1 classified, 2 extracted")
    categories = _text_array()
    outcome = models.TextField(choices=Outcome.choices, default=Outcome.QUEUED, db_default="queued")

    class Meta:
        db_table = "message_receipts"
        constraints = [
            models.UniqueConstraint(fields=["channel_id", "wire_msg_id"], name="receipts_channel_msg_uniq"),
        ]
        indexes = [
            models.Index(fields=["channel_id", "author_id", "-sent_at"], name="receipts_channel_author_idx"),
            models.Index(fields=["channel_id", "-sent_at"], name="receipts_channel_sent_idx"),
        ]


class LlmCall(models.Model):
    """One model call: which slot, model, tokens, cost, latency, outcome. No prompt, no completion."""

    class Outcome(models.TextChoices):
        OK = "ok", "ok"
        INVALID = "invalid", "invalid output"
        TIMEOUT = "timeout", "timeout"
        ERROR = "error", "error"

    id = models.BigAutoField(primary_key=True)
    slot = models.TextField()
    model = models.TextField()
    fallback_used = models.BooleanField(default=False, db_default=False)
    attempt = models.SmallIntegerField(default=1, db_default=1)
    prompt_tokens = models.IntegerField(null=True, blank=True)
    completion_tokens = models.IntegerField(null=True, blank=True)
    cost = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    latency_ms = models.IntegerField()
    outcome = models.TextField(choices=Outcome.choices)
    channel_id = models.TextField(null=True, blank=True)
    created_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "llm_calls"
        verbose_name = "LLM call"
        indexes = [models.Index(fields=["slot", "-created_at"], name="llm_calls_slot_created_idx")]


class FriendlyIdSequence(models.Model):
    """The per-channel counter behind DEC-0007 / ACT-0012."""

    id = models.BigAutoField(primary_key=True)
    channel_id = models.TextField()
    kind = models.TextField(choices=[("DEC", "decision"), ("ACT", "action")])
    last_value = models.IntegerField(default=0, db_default=0)

    class Meta:
        db_table = "friendly_id_sequences"
        constraints = [models.UniqueConstraint(fields=["channel_id", "kind"], name="friendly_seq_uniq")]


class PipelineCounter(models.Model):
    """Durable per-channel counters of what the pipeline dropped (expired, evicted_unextracted, ...)."""

    id = models.BigAutoField(primary_key=True)
    channel_id = models.TextField()
    name = models.TextField()
    value = models.BigIntegerField(default=0, db_default=0)
    updated_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "pipeline_counters"
        constraints = [models.UniqueConstraint(fields=["channel_id", "name"], name="pipeline_counter_uniq")]


class RomanBot(models.Model):
    """A Roman bot instance and its lifelong token (encrypted at rest; never shown in the admin)."""

    bot_id = models.TextField(primary_key=True)
    channel_id = models.TextField(null=True, blank=True)
    token_ciphertext = models.TextField(help_text="Fernet-encrypted with a key derived from DJANGO_SECRET_KEY")
    created_at = models.DateTimeField(db_default=Now())
    removed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "roman_bots"
        indexes = [models.Index(fields=["channel_id"], name="roman_bots_channel_idx")]


class MessageTombstone(models.Model):
    """A message its author deleted: its id (never its text) until `expires_at`, so a message whose delete
    arrives before it, or while it is being classified or extracted, is dropped instead of recorded."""

    id = models.BigAutoField(primary_key=True)
    channel_id = models.TextField()
    wire_msg_id = models.TextField()
    expires_at = models.DateTimeField()

    class Meta:
        db_table = "message_tombstones"
        constraints = [
            models.UniqueConstraint(fields=["channel_id", "wire_msg_id"], name="tombstones_channel_msg_uniq")
        ]
        indexes = [models.Index(fields=["expires_at"], name="tombstones_expires_idx")]


class EntityMention(models.Model):
    """The evidence of an entity's mentions: one row per extraction run that named it, with the run's
    message ids. `entities.mention_count` counts these rows, so a deleted message takes its mention away."""

    id = models.BigAutoField(primary_key=True)
    entity = _link(Entity, "entity_id", related_name="mentions")
    channel_id = models.TextField()
    run_key = models.TextField(help_text="The extraction run (from its pending message ids)")
    wire_msg_ids = _text_array()
    seen_at = models.DateTimeField()

    class Meta:
        db_table = "entity_mentions"
        constraints = [
            models.UniqueConstraint(fields=["entity", "channel_id", "run_key"], name="entity_mentions_run_uniq")
        ]
        indexes = [
            models.Index(fields=["channel_id"], name="entity_mentions_channel_idx"),
            GinIndex(fields=["wire_msg_ids"], name="entity_mentions_msgs_gin"),
        ]


class DigestSubscription(models.Model):
    """A person's wish for the Monday 08:00 personal digest, delivered in their 1:1 with Jeeves."""

    id = models.BigAutoField(primary_key=True)
    channel = _link(ChannelConfig, "channel_id", help_text="The 1:1")
    user_id = models.TextField()
    organisation_id = models.TextField()
    enabled = models.BooleanField(default=True, db_default=True)
    updated_at = models.DateTimeField(db_default=Now())
    last_sent_on = models.DateField(null=True, blank=True, help_text="The channel-local Monday last sent")

    class Meta:
        db_table = "digest_subscriptions"
        constraints = [models.UniqueConstraint(fields=["channel", "user_id"], name="digest_subscriptions_uniq")]
        indexes = [models.Index(fields=["user_id"], name="digest_subscriptions_user_idx")]


class ReviewAudit(models.Model):
    """One review action on one record, from the review desk: who, when, what, and the fields it changed
    (before and after). Shown on the record; deleted with it (and with its channel)."""

    id = models.BigAutoField(primary_key=True)
    at = models.DateTimeField(db_default=Now())
    actor = models.TextField(help_text="The reviewer's admin username")
    action = models.TextField(help_text="confirm, supersede, reverse, reject, done, cancel, reopen, reassign, …")
    channel = _link(ChannelConfig, "channel_id", optional=True)
    decision = _link(Decision, "decision_id", optional=True, related_name="audit")
    action_record = _link(Action, "action_id", optional=True, related_name="audit")
    entity = _link(Entity, "entity_id", optional=True, related_name="audit")
    record = models.TextField(help_text="DEC-0007, ACT-0012, or the entity's name")
    before = models.JSONField(default=dict, db_default={})
    after = models.JSONField(default=dict, db_default={})

    class Meta:
        db_table = "review_audit"
        ordering = ("-at", "-id")
        indexes = [models.Index(fields=["at"], name="review_audit_at_idx")]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M} {self.actor} {self.action} {self.record}"
