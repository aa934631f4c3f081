# A 1:1 is Wire's word (its conversation type), persisted: `is_personal` becomes a column the database
# derives from `conversation_type`, so nothing (a lost member cache included) can write it. Rows keep the
# type Wire gave them; a Roman channel whose 1:1 was inferred from the member cache is a group until
# Jeeves is added there again (unknown means group, docs/guarantees.md §2).

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('knowledge', '0003_retrieval_covering_indexes'),
    ]

    operations = [
        migrations.AlterField(
            model_name='channelconfig',
            name='conversation_type',
            field=models.TextField(choices=[('GROUP', 'Group'), ('ONE_TO_ONE', 'One to one'), ('UNKNOWN', 'Unknown (treated as a group)')], db_default='UNKNOWN', default='UNKNOWN', help_text="Wire's word (app_added, Roman's conversation data); unknown is a group"),
        ),
        migrations.RemoveField(
            model_name='channelconfig',
            name='is_personal',
        ),
        migrations.AddField(
            model_name='channelconfig',
            name='is_personal',
            field=models.GeneratedField(db_persist=True, expression=models.Q(('conversation_type', 'ONE_TO_ONE')), help_text="A 1:1, as Wire's conversation type says", output_field=models.BooleanField()),
        ),
    ]
