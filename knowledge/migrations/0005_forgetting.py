# Forgetting that reaches every table: tombstones of deleted messages, the evidence of entity mentions,
# and the polymorphic "foreign key" of embeddings (source_type, source_id) given its ON DELETE CASCADE:
# deleting a decision, action, signal, entity or summary by any path (the admin, a cascade, raw SQL)
# deletes its vector in the same statement, so no orphan vector is left to be searched.

import django.contrib.postgres.fields
import django.contrib.postgres.indexes
import django.db.models.deletion
from django.db import migrations, models


_KINDS = (
    ("decisions", "decision"),
    ("actions", "action"),
    ("conversation_signals", "signal"),
    ("entities", "entity"),
    ("summaries", "summary"),
)
_FORWARD = "".join(
    f"""
CREATE OR REPLACE FUNCTION jeeves_drop_{kind}_vectors() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM embeddings e USING gone WHERE e.source_type = '{kind}' AND e.source_id = gone.id;
    RETURN NULL;
END $$;
CREATE TRIGGER {table}_drop_vectors AFTER DELETE ON {table}
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION jeeves_drop_{kind}_vectors();
"""
    for table, kind in _KINDS
)
_BACKWARD = "".join(
    f"DROP TRIGGER IF EXISTS {table}_drop_vectors ON {table}; DROP FUNCTION IF EXISTS jeeves_drop_{kind}_vectors();\n"
    for table, kind in _KINDS
)


class Migration(migrations.Migration):

    dependencies = [
        ('knowledge', '0004_conversation_type_decides_scope'),
    ]

    operations = [
        migrations.CreateModel(
            name='MessageTombstone',
            fields=[
                ('id', models.BigAutoField(primary_key=True, serialize=False)),
                ('channel_id', models.TextField()),
                ('wire_msg_id', models.TextField()),
                ('expires_at', models.DateTimeField()),
            ],
            options={
                'db_table': 'message_tombstones',
                'indexes': [models.Index(fields=['expires_at'], name='tombstones_expires_idx')],
                'constraints': [models.UniqueConstraint(fields=('channel_id', 'wire_msg_id'), name='tombstones_channel_msg_uniq')],
            },
        ),
        migrations.CreateModel(
            name='EntityMention',
            fields=[
                ('id', models.BigAutoField(primary_key=True, serialize=False)),
                ('channel_id', models.TextField()),
                ('run_key', models.TextField(help_text='The extraction run (from its pending message ids)')),
                ('wire_msg_ids', django.contrib.postgres.fields.ArrayField(base_field=models.TextField(), blank=True, db_default=models.Value('{}'), default=list, size=None)),
                ('seen_at', models.DateTimeField()),
                ('entity', models.ForeignKey(db_column='entity_id', on_delete=django.db.models.deletion.CASCADE, related_name='mentions', to='knowledge.entity')),
            ],
            options={
                'db_table': 'entity_mentions',
                'indexes': [models.Index(fields=['channel_id'], name='entity_mentions_channel_idx'), django.contrib.postgres.indexes.GinIndex(fields=['wire_msg_ids'], name='entity_mentions_msgs_gin')],
                'constraints': [models.UniqueConstraint(fields=('entity', 'channel_id', 'run_key'), name='entity_mentions_run_uniq')],
            },
        ),
        migrations.RunSQL(_FORWARD, _BACKWARD),
    ]
