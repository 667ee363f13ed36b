"""CTX-45: summaries prepared in the background (PreparedCompaction)."""

import django.db.models.deletion
import django_cryptography.fields
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('agent_sessions', '0006_encrypt_titles_and_counters'),
    ]

    operations = [
        migrations.CreateModel(
            name='PreparedCompaction',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('status', models.CharField(choices=[('preparing', 'Preparing'), ('ready', 'Ready'), ('used', 'Used'), ('discarded', 'Discarded'), ('failed', 'Failed')], default='preparing', max_length=16)),
                ('snapshot', django_cryptography.fields.encrypt(models.JSONField(default=dict))),
                ('tokens', models.PositiveIntegerField(default=0, help_text="The calibrated figure of the snapshot's request.")),
                ('policy', models.JSONField(default=dict)),
                ('estimator_id', models.CharField(max_length=64)),
                ('summary', django_cryptography.fields.encrypt(models.TextField(blank=True, default=''))),
                ('prefix', models.PositiveIntegerField(blank=True, null=True)),
                ('digest', models.CharField(blank=True, max_length=64)),
                ('metrics', models.JSONField(default=dict)),
                ('reason', models.CharField(blank=True, max_length=64)),
                ('claimed_at', models.DateTimeField(blank=True, null=True)),
                ('lease_until', models.DateTimeField(blank=True, null=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('ready_at', models.DateTimeField(blank=True, null=True)),
                ('ended_at', models.DateTimeField(blank=True, null=True)),
                ('instance', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='prepared_compactions', to='agent_sessions.instance')),
                ('run', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='prepared_compactions', to='agent_sessions.run')),
                ('session', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='prepared_compactions', to='agent_sessions.session')),
            ],
            options={
                'ordering': ['session_id', '-id'],
                'indexes': [models.Index(fields=['session', 'status'], name='prepared_session_status')],
                'constraints': [models.UniqueConstraint(condition=models.Q(('status', 'preparing')), fields=('session',), name='prepared_one_preparing_per_session')],
            },
        ),
    ]
