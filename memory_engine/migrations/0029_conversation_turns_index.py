"""A conversation's live turns in order (store, conversation_id, time, id): search reads the
turns next to a hit by it (docs/retrieval.md, *Neighbouring turns*)."""

import django.db.models.fields.json
import django.db.models.functions.comparison
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('memory_engine', '0028_lexical_statistics'),
    ]

    operations = [
        migrations.AddIndex(
            model_name='memory',
            index=models.Index(models.F('store'), django.db.models.functions.comparison.Coalesce(django.db.models.fields.json.KeyTextTransform('conversation_id', 'metadata'), models.Value('')), models.F('created_at'), models.F('id'), condition=models.Q(('invalidated_at__isnull', True), ('source_type', 'conversation')), name='me_memory_turns'),
        ),
    ]
