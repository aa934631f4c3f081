"""Celery tasks of the pipeline tiers. Thin: parse arguments, check consent, call a service.

Every task carries the channel `epoch` it was queued under and is dropped (and counted) when the
channel is no longer active or has moved to a new epoch. Tasks carry ids and claim-check keys,
never text. A task Celery drops as expired (`expires`) is counted through `task_revoked`.
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime, timedelta

import redis
from celery import shared_task
from celery.signals import (
    celeryd_after_setup,
    task_postrun,
    task_prerun,
    task_revoked,
    worker_process_init,
    worker_ready,
)
from django import db
from django.conf import settings
from django.utils import timezone

from ground.queues import Queue
from ground.redis import forget_channel_keys
from knowledge import channels, counters, forgetting, receipts
from knowledge.models import ChannelConfig, MessageReceipt
from pipeline import claimcheck, debounce, liveness, window

logger = logging.getLogger(__name__)


def _accepting(channel_id: str, epoch: int, task: str) -> ChannelConfig | None:
    if channels.channel_accepts(channel_id, epoch):
        return ChannelConfig.objects.get(channel_id=channel_id)
    counters.bump_counter(channel_id, f"{task}_dropped")
    logger.info("%s dropped: channel=%s (state or epoch changed)", task, channel_id)
    return None


# A backing service away (Postgres restarting, Redis failing over): the task is retried with exponential
# backoff and jitter (1, 2, 4 … 30 s) instead of failing and being acknowledged. A classify retry keeps its
# expiry, so text past its TTL is counted expired, never retried for ever; an extraction rolls back whole.
BACKEND_RETRY = {
    "autoretry_for": (db.OperationalError, db.InterfaceError, redis.ConnectionError, redis.TimeoutError),
    "retry_backoff": 1,
    "retry_backoff_max": 30,
    "retry_jitter": True,
    "max_retries": 12,
}


@shared_task(name="pipeline.tasks.classify_message", queue=Queue.CLASSIFY.value, **BACKEND_RETRY)
def classify_message(
    channel_id: str,
    wire_msg_id: str,
    epoch: int,
    author_id: str | None = None,
    sent_at: str | None = None,
    over_rate: bool = False,
) -> None:
    from pipeline import batch, classify

    # Derived, never taken from the caller: the text read is always this channel's own message.
    key = claimcheck.key_for(channel_id, wire_msg_id)
    if batch.done(channel_id, wire_msg_id):
        return  # classified by another task's batch (pipeline/batch.py), its text already discarded
    done = receipts.receipt_state(channel_id, wire_msg_id)
    if done is not None and (done[0] >= 1 or done[1] != MessageReceipt.Outcome.QUEUED):
        # Classified already: a redelivery, or a companion of another task's batch (pipeline/batch.py).
        claimcheck.discard(key)
        return
    channel = _accepting(channel_id, epoch, "classify")
    if channel is None:
        receipts.mark_receipt(channel_id, wire_msg_id, outcome=MessageReceipt.Outcome.DROPPED)
        claimcheck.discard(key)
        return
    if forgetting.tombstoned(channel_id, [wire_msg_id]):
        claimcheck.discard(key)  # its author deleted it before a worker reached it: not even a receipt
        logger.info("classify dropped (message deleted): channel=%s msg=%s", channel_id, wire_msg_id)
        return
    when = datetime.fromisoformat(sent_at) if sent_at else None
    tier, outcome = receipts.ensure_receipt(channel_id, wire_msg_id, author_id=author_id, sent_at=when)
    if tier >= 1 or outcome != MessageReceipt.Outcome.QUEUED:
        claimcheck.discard(key)
        return  # a redelivery of a message already classified (or deleted, expired, dropped)
    text = claimcheck.claim(key)
    if text is None:
        if receipts.mark_expired(channel_id, wire_msg_id):
            logger.info("classify expired: channel=%s msg=%s", channel_id, wire_msg_id)
        return
    if over_rate:
        # Over its channel's rate at the bridge: classified by the offline engine (no model spend), counted.
        counters.bump_counter(channel_id, "classified_over_rate")
    todo = [classify.Pending(channel, wire_msg_id, text, over_rate)]
    size = settings.JEEVES.classify_batch
    if size > 1 and not classify_message.request.called_directly and classify.batches():
        # Delivered by a worker with the offline engine: the messages queued behind this one join it.
        queued = batch.take(channel_id, wire_msg_id, size - 1)
        companions, left = batch.ready(queued)
        batch.release([(q.channel_id, q.wire_msg_id) for q in left])  # their own tasks see to them
        for c in companions:
            if c.offline_only:  # over its channel's rate
                counters.bump_counter(c.channel.channel_id, "classified_over_rate")
        todo += companions
        taken = [(p.channel.channel_id, p.wire_msg_id) for p in todo]
        try:
            classify.classify_messages(todo)
        except BaseException:
            batch.release(taken)
            raise
    else:
        queued, left, taken = [], [], []
        classify.classify_messages(todo)
    # Discarded only once classified: a worker killed mid-task leaves the keys for the redeliveries.
    claimcheck.discard_many([claimcheck.key_for(p.channel.channel_id, p.wire_msg_id) for p in todo])
    batch.mark_done(taken)  # the companions' own tasks return at once
    batch.dequeue([q for q in queued if q not in left])  # and those still queued are not delivered at all
    by_channel: dict[str, list[str]] = {}
    for p in todo:
        by_channel.setdefault(p.channel.channel_id, []).append(p.wire_msg_id)
    for cid, ids in by_channel.items():
        for deleted in forgetting.tombstoned(cid, ids):
            # Deleted while it was being classified: what was just written rests on it.
            forgetting.forget_message(cid, deleted)


@shared_task(name="pipeline.tasks.extract_channel", queue=Queue.EXTRACT.value, **BACKEND_RETRY)
def extract_channel(channel_id: str, epoch: int) -> None:
    from pipeline import extract

    channel = _accepting(channel_id, epoch, "extract")
    if channel is None:
        current = (
            ChannelConfig.objects.active()
            .filter(channel_id=channel_id)
            .exclude(epoch=epoch)
            .values_list("epoch", flat=True)
            .first()
        )
        if current is not None:  # secure mode came and went: what is pending now belongs to the new epoch
            debounce.reschedule(channel_id, current)
        return
    token = debounce.begin_run(channel_id)
    if token is None:
        debounce.retry_later(channel_id, epoch)
        return
    try:
        report = extract.run(channel)
    finally:
        debounce.end_run(channel_id, token)
    logger.info(
        "extracted: channel=%s pending=%d evicted=%d written=%s failed=%s model=%s",
        channel_id,
        report.pending,
        report.evicted,
        dict(report.written),
        report.failed,
        report.model,
    )


@shared_task(name="pipeline.tasks.embed_records", queue=Queue.EMBED.value, **BACKEND_RETRY)
def embed_records(channel_id: str, epoch: int, records: list[list[str]]) -> None:
    from pipeline import batch, embed

    if _accepting(channel_id, epoch, "embed") is None:
        return
    todo = [(kind, pk) for kind, pk in records]
    size = settings.JEEVES.embed_batch
    if size > 1 and not embed_records.request.called_directly:
        # Delivered by a worker: the records of the embed tasks queued behind this one join its forward pass.
        todo += batch.embed_companions(size - 1)
    embed.embed_records(todo)


@shared_task(
    name="pipeline.tasks.forget_message",
    queue=Queue.EXTRACT.value,
    # The author's wish must not be lost to a busy database: retried, with backoff, until it succeeds.
    autoretry_for=(Exception,),
    max_retries=None,
    retry_backoff=2,
    retry_backoff_max=300,
    retry_jitter=True,
)
def forget_message(channel_id: str, wire_msg_id: str) -> None:
    """The author deleted the message: it leaves the window, every record resting on it goes, and the
    summaries that retold those are written again from what is left.

    No epoch check: the author's wish applies whatever the channel's state.
    """
    window.remove(channel_id, wire_msg_id)
    debounce.forget(channel_id, wire_msg_id)
    forgotten = forgetting.forget_message(channel_id, wire_msg_id)
    if forgotten.summaries:
        resummarise.apply_async(
            kwargs={
                "channel_id": channel_id,
                "periods": [
                    [p.granularity, p.period_start.isoformat(), p.period_end.isoformat()] for p in forgotten.summaries
                ],
            },
            expires=24 * 3600,
        )
    logger.info("forgot message: channel=%s msg=%s %s", channel_id, wire_msg_id, dict(forgotten.counts))


@shared_task(name="pipeline.tasks.resummarise", queue=Queue.SUMMARISE.value)
def resummarise(channel_id: str, periods: list[list[str]]) -> None:
    """Write again the summaries withdrawn when a record they retold was forgotten (dailies before weeklies)."""
    from pipeline import summaries

    channel = ChannelConfig.objects.filter(channel_id=channel_id, left_at__isnull=True).first()
    if channel is None:
        return
    ordered = sorted(periods, key=lambda p: (p[0] != "daily", p[1]))
    for granularity, start, end in ordered:
        summary = summaries.rewrite(channel, granularity, datetime.fromisoformat(start), datetime.fromisoformat(end))
        if summary is not None:
            embed_records.apply_async(
                kwargs={"channel_id": channel_id, "epoch": channel.epoch, "records": [["summary", str(summary.pk)]]},
                expires=3600,
            )


@shared_task(name="pipeline.tasks.purge_left_channels", queue=Queue.SUMMARISE.value)
def purge_left_channels() -> None:
    """Beat, hourly (and at once when the grace is 0): purge channels Jeeves left longer ago than
    JEEVES_RETENTION_AFTER_LEAVE_DAYS, from every table and from Redis."""
    grace = timedelta(days=settings.JEEVES.retention_after_leave_days)
    for channel_id, counts in forgetting.purge_left_channels(grace).items():
        forget_channel_keys(channel_id)
        logger.info("purged left channel: channel=%s rows=%d", channel_id, sum(counts.values()))


@shared_task(name="pipeline.tasks.age_out_records", queue=Queue.SUMMARISE.value)
def age_out_records() -> None:
    """Beat, nightly: records older than JEEVES_RETENTION_DAYS (when set) and expired tombstones go."""
    days = settings.JEEVES.retention_days
    counts = forgetting.age_out(timezone.now() - timedelta(days=days) if days else None)
    logger.info("aged out: rows=%d", sum(counts.values()))


@shared_task(name="pipeline.tasks.summarise_due_channels", queue=Queue.SUMMARISE.value)
def summarise_due_channels(granularity: str) -> None:
    """Beat, hourly: the daily (or Monday's weekly) summary of every channel where it is now 08:00."""
    from pipeline import summaries

    for channel, summary in summaries.summarise_due(granularity):
        # Ids only; no claim-check text to outlive, so the embed may wait behind a busy queue.
        embed_records.apply_async(
            kwargs={
                "channel_id": channel.channel_id,
                "epoch": channel.epoch,
                "records": [["summary", str(summary.pk)]],
            },
            expires=3600,
        )


@shared_task(name="pipeline.tasks.staleness_check", queue=Queue.SUMMARISE.value)
def staleness_check() -> None:
    """Beat, twice daily: one nudge per overdue open action not asked about in 24 hours."""
    from pipeline import staleness

    staleness.run()


@shared_task(name="pipeline.tasks.check_contradictions", queue=Queue.EXTRACT.value)
def check_contradictions(channel_id: str, epoch: int, decision_ids: list[str]) -> None:
    """After an extraction run: judge its decisions against the channel's recent ones (docs/architecture.md §8)."""
    from pipeline import contradictions

    channel = _accepting(channel_id, epoch, "contradiction_check")
    if channel is None:
        return
    contradictions.check(channel, decision_ids)


@shared_task(name="pipeline.tasks.raise_contradictions", queue=Queue.SUMMARISE.value)
def raise_contradictions() -> None:
    """Beat, every five minutes: one prompt per held conflict whose decisions are both 30 minutes old."""
    from pipeline import contradictions

    contradictions.raise_due()


@shared_task(name="pipeline.tasks.reconcile", queue=Queue.SUMMARISE.value)
def reconcile() -> dict[str, int]:
    """Published by the sweeper (pipeline/liveness.py) every few sweeps: messages the stack lost track of
    (a Redis restarted empty, a whole node died with their tasks) are finished or counted, never left waiting.

    - received, not classified, with its text gone (past its TTL, or Redis restarted empty): expired, counted;
    - classified high-signal but in no channel's pending set (Redis lost it): extracted again when still
      in the window, else counted as evicted unextracted;
    - pending with no run scheduled or running: a run is requested.
    Ids only; the receipts' transitions are the same guarded moves the tiers make, so nothing counts twice.
    """
    cfg = settings.JEEVES
    now = timezone.now()
    counts = {"expired": 0, "requeued_extract": 0, "evicted": 0}
    # Tier 0 with its text gone can only mean expired or lost: the receipt and the text are written together
    # (the text before the receipt commits), and a classify task moves the tier before it discards the text.
    late = now - timedelta(seconds=cfg.clock_skew_s + 2 * cfg.task_lease_s)
    for channel_id, wire_msg_id in MessageReceipt.objects.filter(
        tier=0, outcome=MessageReceipt.Outcome.QUEUED, received_at__lt=late
    ).values_list("channel_id", "wire_msg_id")[:1000]:
        if claimcheck.claim(claimcheck.key_for(channel_id, wire_msg_id)) is None and receipts.mark_expired(
            channel_id, wire_msg_id
        ):
            counts["expired"] += 1
    stalled = now - timedelta(seconds=cfg.extract_debounce_s + 2 * cfg.task_lease_s + 10)
    by_channel: dict[str, list[str]] = {}
    for channel_id, wire_msg_id in MessageReceipt.objects.filter(
        outcome=MessageReceipt.Outcome.PENDING_EXTRACT, received_at__lt=stalled
    ).values_list("channel_id", "wire_msg_id")[:5000]:
        by_channel.setdefault(channel_id, []).append(wire_msg_id)
    for channel_id, ids in by_channel.items():
        channel = ChannelConfig.objects.active().filter(channel_id=channel_id).first()
        if channel is None:
            continue
        waiting = debounce.pending(channel_id)
        in_window = {m.id for m in window.read(channel_id)}
        lost = [i for i in ids if i not in waiting]
        for wire_msg_id in lost:
            if wire_msg_id in in_window:
                debounce.note_classified(channel_id, wire_msg_id)
                counts["requeued_extract"] += 1
        gone = [i for i in lost if i not in in_window]
        if gone:
            counts["evicted"] += receipts.mark_evicted(channel_id, gone)
        if debounce.pending(channel_id):
            debounce.request_extract(channel_id, channel.epoch)
    if any(counts.values()):
        logger.warning("reconciled: %s", counts)
    return counts


@task_revoked.connect
def _count_expired(sender=None, request=None, expired: bool = False, **kwargs) -> None:
    """Celery dropped a task past its `expires`: count it (and mark its receipt) instead of losing it silently."""
    if not expired or request is None:
        return
    task_kwargs = getattr(request, "kwargs", None) or {}
    channel_id = task_kwargs.get("channel_id")
    if not channel_id:
        return
    name = getattr(sender, "name", "") or ""
    if name == "pipeline.tasks.classify_message":
        # Counted with its receipt, once: a second copy of the task (republished) counts nothing. The receipt is
        # written first when the webhook's (written after its response) is not there yet.
        wire_msg_id = task_kwargs.get("wire_msg_id")
        if not wire_msg_id:
            return
        sent_at = task_kwargs.get("sent_at")
        receipts.ensure_receipts([(channel_id, wire_msg_id, task_kwargs.get("author_id"), sent_at)])
        if not receipts.mark_expired(channel_id, wire_msg_id):
            return
    else:
        counters.bump_counter(channel_id, "expired")
    logger.info("task expired: %s channel=%s", name, channel_id)


# The queues whose tasks embed (Tier 1's classifier, Tier 2's entity matching, Tier 3, the question path):
# only their workers load the embedder. Summarise, beat, flower and web never do.
EMBEDDING_QUEUES: frozenset[str] = frozenset({Queue.CLASSIFY, Queue.EXTRACT, Queue.EMBED, Queue.RESPOND})
# The queues whose tasks build the offline engine's feature rows (Tier 1's classifier, Tier 2's extractor).
FEATURE_QUEUES: frozenset[str] = frozenset({Queue.CLASSIFY, Queue.EXTRACT})
_embeds = True  # whether this worker consumes an embedding queue; set in the worker's main process


@celeryd_after_setup.connect
def _preload(sender=None, instance=None, **kwargs) -> None:
    """In the worker's main process, after -Q is applied and before the pool starts: a worker of an embedding
    queue loads the bundled model here, so prefork children inherit its weights (copy-on-write, shared in
    memory) instead of loading a copy each. Only the weights: the children run the first embedding (a
    forward pass in a parent that forks is what torch's threads do not survive)."""
    global _embeds
    from ground.config import LOCAL_MODEL
    from pipeline import embedder

    consumed = set((instance.app.amqp.queues.consume_from or {}).keys()) if instance is not None else set()
    _embeds = not consumed or bool(consumed & EMBEDDING_QUEUES)
    pool = getattr(instance, "pool_cls", None)
    prefork = pool is not None and "prefork" in getattr(pool, "__module__", "")
    if _embeds and prefork and settings.JEEVES.slot("embed").model == LOCAL_MODEL:
        embedder.local_model()
    if prefork and (not consumed or consumed & FEATURE_QUEUES):
        # The offline engine's feature rows need scikit-learn and SciPy (imported on first use, not by
        # every process that checks the engine's artefacts): imported here, the children share them. Tier 3
        # and the question path never build feature rows: their workers do without them (~50 MB a pair).
        from pipeline.offline import features

        features.vectorisers()
    if prefork and any(slot.model != LOCAL_MODEL for slot in settings.JEEVES.slots.values()):
        # litellm takes seconds to import (17 s on a loaded 2-core machine): imported once here, a child
        # forked after a crash answers its first task at once instead of while that task's TTL runs.
        import litellm  # noqa: F401


def _warm_up(**kwargs) -> None:
    """Load and probe the embedder before the first message, not while its claim check ticks.

    In a thread: a prefork child must report itself up within seconds, and loading MiniLM
    takes longer on a busy machine; a task that needs the embedder first waits on its lock.
    """
    if not _embeds:
        return
    from pipeline import embed

    threading.Thread(target=embed.ready, name="embedder-warm-up", daemon=True).start()


# Prefork children warm up in their own process; the solo pool runs tasks in the main process.
worker_process_init.connect(_warm_up, weak=False)


@worker_ready.connect
def _warm_up_solo(sender=None, **kwargs) -> None:
    pool = getattr(getattr(sender, "controller", None), "pool_cls", None)
    if pool is not None and "solo" in getattr(pool, "__module__", ""):
        _warm_up()


# --------------------------------------------------------------------------- liveness (pipeline/liveness.py)


@task_prerun.connect
def _lease(task_id: str | None = None, **kwargs) -> None:
    """A running task holds a lease: a worker that dies stops renewing it and the sweeper puts the task back."""
    if task_id:
        try:
            liveness.hold_task(task_id)
        except Exception as exc:  # Redis away: the task runs; at worst it is done twice (idempotent)
            logger.warning("lease not taken (%s)", type(exc).__name__)


@task_postrun.connect
def _unlease(task_id: str | None = None, **kwargs) -> None:
    if task_id:
        try:
            liveness.release_task(task_id)
        except Exception as exc:
            logger.warning("lease not released (%s); it lapses by itself", type(exc).__name__)


@worker_ready.connect
def _start_sweeper(**kwargs) -> None:
    liveness.start_sweeper()
