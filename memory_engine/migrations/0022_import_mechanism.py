"""The ledger names memory_engine_import's writes (mechanism ``import``)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('memory_engine', '0021_tenant_project_columns'),
    ]

    operations = [
        migrations.AlterField(
            model_name='memoryassertion',
            name='mechanism',
            field=models.CharField(choices=[('api', 'Api'), ('tool', 'Tool'), ('rule', 'Rule'), ('formation', 'Formation'), ('distiller', 'Distiller'), ('import', 'Import'), ('system', 'System')], max_length=20),
        ),
    ]
