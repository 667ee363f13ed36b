"""Fills ``Session.action_model`` from the action calls already logged (see 0012).

Not one transaction: each chunk of sessions is written on its own, so questions go on
meanwhile (a record's append updates its session's row). Calls a worker of the version
before 0012 makes after this ran are found by ``session_traits`` while their session has
noted nothing; a session of a noted model that such a worker moves to another model in
that moment is not — stop the workers before migrating to rule it out (docs/operations.md).
"""
from django.db import migrations

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
            # Only what no run noted meanwhile: a run's note took every earlier call into account.
            Session.objects.filter(pk__in=ids[start:start + CHUNK], action_model="").update(action_model=mark)


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ('agent_sessions', '0012_session_action_model'),
    ]

    operations = [
        migrations.RunPython(_fill, migrations.RunPython.noop),
    ]
