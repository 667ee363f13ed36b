"""``Session.action_model``: where a session's action calls went, kept as they are made, so a
run learns whether an earlier call went to another model (CTX-11) from its session's row
instead of every call of the session (issue #29). Filled by 0013, apart: adding the column
takes the session table's lock only for the moment it takes (no rewrite: a constant default).
"""
from django.db import migrations, models


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
    ]
