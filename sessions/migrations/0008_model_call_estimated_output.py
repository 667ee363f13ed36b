from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("agent_sessions", "0007_prepared_compaction"),
    ]

    operations = [
        migrations.AddField(
            model_name="modelcall",
            name="estimated_output_tokens",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
    ]
