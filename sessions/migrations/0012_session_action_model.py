"""``Session.action_model``: where a session's action calls went, kept as they are made, so a
run learns whether an earlier call went to another model (CTX-11) from its session's row
instead of every call of the session (issue #29). Filled here from the calls already logged.
"""
from django.db import migrations, models

ACTION = "action"
MIXED_MODELS = "*"
CHUNK = 1_000


def _fill(apps, schema_editor):
    ModelCall = apps.get_model("agent_sessions", "ModelCall")
    Session = apps.get_model("agent_sessions", "Session")
    seen: dict[int, set[str]] = {}
    calls = (ModelCall.objects.filter(purpose=ACTION).order_by()
             .values_list("run__session_id", "provider", "model").distinct())
    for session_id, provider, model in calls:
        seen.setdefault(session_id, set()).add(f"{provider}:{model}")
    marks: dict[str, list[int]] = {}
    for session_id, keys in seen.items():
        marks.setdefault(next(iter(keys)) if len(keys) == 1 else MIXED_MODELS, []).append(session_id)
    for mark, ids in marks.items():
        for start in range(0, len(ids), CHUNK):
            Session.objects.filter(pk__in=ids[start:start + CHUNK]).update(action_model=mark)


class Migration(migrations.Migration):

    dependencies = [
        ('agent_sessions', '0011_fewer_indexes'),
    ]

    operations = [
        migrations.AddField(
            model_name='session',
            name='action_model',
            field=models.CharField(blank=True, default='', max_length=240),
        ),
        migrations.RunPython(_fill, migrations.RunPython.noop),
    ]
