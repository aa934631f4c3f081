"""Covering indexes for the retrieval paths' reads of one channel's rows (retrieval/paths.py).

Records arrive interleaved across channels, so a channel's rows lie one per heap page: reading a scope
through the plain channel index touches as many pages as it has rows (~1,000 per question on the
1M-embedding bench, for each of the two paths below). These indexes carry every column those reads use,
so they run as index-only scans over a few contiguous leaf pages:

- `embeddings_scope_cover_idx`: the semantic path's exact scan of a channel (vector, type, source id);
  partial, on the record kinds it searches (`paths.SEARCHED_KINDS`, which must imply this predicate).
  Keyed (channel, type, source id), so a lookup of one record's vector in its channel is index-only too.
  It holds a copy of each vector: about 2.6 kB per embedding (2.6 GB at 1M).
- `signals_scope_text_cover_idx`: the full-text path's scope-first read of a channel's signals
  (id, search_vector), the largest of the four tables it reads.

Plain SQL outside the models' state: only the hand-written retrieval SQL uses them. CONCURRENTLY, so
adding them to a live database does not block writes (hence not atomic).
"""

from django.db import migrations

EMBEDDINGS = (
    "CREATE INDEX CONCURRENTLY IF NOT EXISTS embeddings_scope_cover_idx ON embeddings (channel_id, source_type, source_id)"
    " INCLUDE (organisation_id, embedding)"
    " WHERE source_id IS NOT NULL AND source_type IN ('decision', 'action', 'signal', 'summary', 'entity')"
)
SIGNALS = (
    "CREATE INDEX CONCURRENTLY IF NOT EXISTS signals_scope_text_cover_idx ON conversation_signals (channel_id)"
    " INCLUDE (organisation_id, id, search_vector)"
)


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("knowledge", "0002_channel_db_defaults"),
    ]

    operations = [
        migrations.RunSQL(EMBEDDINGS, reverse_sql="DROP INDEX CONCURRENTLY IF EXISTS embeddings_scope_cover_idx"),
        migrations.RunSQL(SIGNALS, reverse_sql="DROP INDEX CONCURRENTLY IF EXISTS signals_scope_text_cover_idx"),
    ]
