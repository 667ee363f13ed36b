"""A run carries its session's person and space, and why it waits (issue #44).

The claim counts a person's (and a space's) running runs through them. Filled here for every
run that can still run — queued, running, or ended in a way a resume continues — a thousand
a transaction, so questions go on meanwhile; a completed run never runs again and is left
as it is. Runs an earlier worker makes during the upgrade carry no person: stop the workers
before ``migrate`` (docs/operations.md), or they are simply not counted.
"""
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models
from django.db.models import OuterRef, Subquery

CHUNK = 1_000


def _fill(apps, schema_editor):
    Run = apps.get_model("agent_sessions", "Run")
    Session = apps.get_model("agent_sessions", "Session")
    of_session = Session.objects.filter(pk=OuterRef("session_id"))
    ids = list(Run.objects.exclude(status="completed").filter(user__isnull=True).order_by("pk")
               .values_list("pk", flat=True))
    for start in range(0, len(ids), CHUNK):
        Run.objects.filter(pk__in=ids[start:start + CHUNK]).update(
            user_id=Subquery(of_session.values("user_id")[:1]), space_id=Subquery(of_session.values("space_id")[:1]))


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ('agent_sessions', '0013_session_action_model_fill'),
        ('agents', '0003_agent_tool_overrides_agentversion_server_tools'),
        ('spaces', '0001_initial'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='run',
            name='space',
            field=models.ForeignKey(blank=True, db_constraint=False, db_index=False, null=True, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='spaces.space'),
        ),
        migrations.AddField(
            model_name='run',
            name='user',
            field=models.ForeignKey(blank=True, db_constraint=False, db_index=False, null=True, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddField(
            model_name='run',
            name='waiting_reason',
            field=models.CharField(blank=True, choices=[('user_limit', "Its person's earlier runs are still running"), ('space_limit', "Its space's runs are at their bound")], default='', max_length=16),
        ),
        migrations.RunPython(_fill, migrations.RunPython.noop),
        migrations.AddIndex(
            model_name='run',
            index=models.Index(condition=models.Q(('status', 'running')), fields=['user'], name='run_running_user'),
        ),
        migrations.AddIndex(
            model_name='run',
            index=models.Index(condition=models.Q(('status', 'running')), fields=['space'], name='run_running_space'),
        ),
        migrations.AddIndex(
            model_name='run',
            index=models.Index(condition=models.Q(('status', 'queued'), models.Q(('waiting_reason', ''), _negated=True)), fields=['id'], name='run_waiting'),
        ),
    ]
