"""Fewer index writes per question (issue #29).

A key whose composite index already leads with it loses its own index (each was one
more write per row: a record had eleven indexes to write, an event three), and no index
holds a column a step writes, so a step's UPDATE of its run is a HOT update. The run
table keeps 30 % of each page free for those updates: a run is updated about seven
times in its first second, and a HOT update needs room in the row's own page.

The indexes are dropped by name, not by ``AlterField(db_index=False)``: on PostgreSQL that
drops every index of the column but the model's own ``Meta.indexes`` — the partial unique
index ``run_one_active_per_session`` on ``run.session_id`` with them — and re-adds each
foreign key, checking every row of the table again.
"""
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

# (table, column, the index Django made for the key): named as Django names them, on
# PostgreSQL and SQLite alike.
DROPPED = (
    ("agent_sessions_session", "user_id", "agent_sessions_session_user_id_a2e02a4f"),
    ("agent_sessions_run", "session_id", "agent_sessions_run_session_id_f397ef8b"),
    ("agent_sessions_instance", "run_id", "agent_sessions_instance_run_id_392ae319"),
    ("agent_sessions_sessionmessage", "session_id", "agent_sessions_sessionmessage_session_id_24b8412a"),
    ("agent_sessions_sessionmessage", "run_id", "agent_sessions_sessionmessage_run_id_467d29bb"),
    ("agent_sessions_sessionmessage", "instance_id", "agent_sessions_sessionmessage_instance_id_6df4d79a"),
    ("agent_sessions_sessionmessage", "created_at", "agent_sessions_sessionmessage_created_at_4bab8aae"),
    ("agent_sessions_runevent", "run_id", "agent_sessions_runevent_run_id_1b335700"),
    ("agent_sessions_sentblob", "session_id", "agent_sessions_sentblob_session_id_2e3fde6a"),
    ("agent_sessions_modelcall", "run_id", "agent_sessions_modelcall_run_id_e965290b"),
)
RUN_FILLFACTOR = 70


def _run_fillfactor(value):
    def apply(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":  # SQLite has no such setting
            table = schema_editor.quote_name(apps.get_model("agent_sessions", "Run")._meta.db_table)
            schema_editor.execute(f"ALTER TABLE {table} SET (fillfactor = {value})")
    return apply


# (model, key, its related name, the model it points to): the keys losing their own index.
KEYS = (
    ("session", "user", "agent_sessions", settings.AUTH_USER_MODEL),
    ("run", "session", "runs", "agent_sessions.session"),
    ("instance", "run", "instances", "agent_sessions.run"),
    ("sessionmessage", "session", "records", "agent_sessions.session"),
    ("sessionmessage", "run", "records", "agent_sessions.run"),
    ("sessionmessage", "instance", "records", "agent_sessions.instance"),
    ("runevent", "run", "events", "agent_sessions.run"),
    ("sentblob", "session", "sent_blobs", "agent_sessions.session"),
    ("modelcall", "run", "model_calls", "agent_sessions.run"),
)


class Migration(migrations.Migration):

    dependencies = [
        ('agent_sessions', '0010_run_session_latest'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name='run',
            name='run_status_heartbeat',
        ),
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(f'DROP INDEX IF EXISTS "{name}"', f'CREATE INDEX "{name}" ON "{table}" ("{column}")')
                for table, column, name in DROPPED
            ],
            state_operations=[
                *(migrations.AlterField(model_name=model, name=name, field=models.ForeignKey(
                    db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name=related, to=to))
                  for model, name, related, to in KEYS),
                migrations.AlterField(model_name='sessionmessage', name='created_at',
                                      field=models.DateTimeField(auto_now_add=True)),
            ],
        ),
        migrations.RunPython(_run_fillfactor(RUN_FILLFACTOR), _run_fillfactor(100), elidable=False),
    ]
