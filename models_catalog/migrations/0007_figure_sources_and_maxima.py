"""One source per figure (CAT-2) and the model's known maxima with theirs (CAT-3).

A connection used to store one combined source, the weaker of its two figures'. Existing
rows keep what they had: the combined source is copied to each figure (a window a token
attested beside a default output limit therefore still reads ``platform_default``, the
cautious reading; discovering and saving again gives each figure its own). No maximum was
stored before: existing rows have none until the next save (the official manifest's, for
an exact id at an official endpoint) or the next save with a discovery result.
"""
from django.db import migrations, models

SOURCES = [("provider", "Provider"), ("official_manifest", "Official manifest"),
           ("platform_default", "Platform default (check it)"), ("manual", "Manual")]
# The old combined source, read back from two: manual when either is, else the weaker.
_RANK = {"platform_default": 0, "official_manifest": 1, "provider": 2}


def copy_the_combined_source_to_each_figure(apps, schema_editor):
    ModelConnection = apps.get_model("models_catalog", "ModelConnection")
    for source, _ in SOURCES:
        ModelConnection.objects.filter(figures_source=source).update(
            context_window_source=source, max_output_tokens_source=source)


def combine_the_sources_again(apps, schema_editor):
    ModelConnection = apps.get_model("models_catalog", "ModelConnection")
    for row in ModelConnection.objects.only("pk", "context_window_source", "max_output_tokens_source"):
        pair = (row.context_window_source, row.max_output_tokens_source)
        combined = "manual" if "manual" in pair else min(pair, key=lambda source: _RANK.get(source, 0))
        ModelConnection.objects.filter(pk=row.pk).update(figures_source=combined)


class Migration(migrations.Migration):

    dependencies = [
        ("models_catalog", "0006_provider_names_from_the_registry"),
    ]

    operations = [
        migrations.AddField(
            model_name="modelconnection",
            name="context_window_source",
            field=models.CharField(choices=SOURCES, default="platform_default", max_length=32,
                                   verbose_name="window source"),
        ),
        migrations.AddField(
            model_name="modelconnection",
            name="max_output_tokens_source",
            field=models.CharField(choices=SOURCES, default="platform_default", max_length=32,
                                   verbose_name="output source"),
        ),
        migrations.RunPython(copy_the_combined_source_to_each_figure, combine_the_sources_again),
        migrations.RemoveField(
            model_name="modelconnection",
            name="figures_source",
        ),
        migrations.AddField(
            model_name="modelconnection",
            name="context_window_maximum",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="modelconnection",
            name="context_window_maximum_source",
            field=models.CharField(blank=True, default="", max_length=32),
        ),
        migrations.AddField(
            model_name="modelconnection",
            name="max_output_tokens_maximum",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="modelconnection",
            name="max_output_tokens_maximum_source",
            field=models.CharField(blank=True, default="", max_length=32),
        ),
    ]
