"""Input validation and output shapes of the session API (SPEC §9)."""
from __future__ import annotations

from typing import Any

from django.urls import reverse
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.api.fields import StrictCharField, id_from_text
from sessions.models import Run, Session, SessionFile, SessionMessage
from sessions.selectors.approvals import approvals_waiting
from sessions.selectors.records import RECORDS_PAGE_DEFAULT, RECORDS_PAGE_MAX, instance_label
from sessions.selectors.sessions import prepared_summary_state


class SessionCreateIn(serializers.Serializer):
    agent = serializers.IntegerField(min_value=1)


class ContentIn(serializers.Serializer):
    content = StrictCharField(max_length=100_000, trim_whitespace=False)


class QuestionIn(ContentIn):
    files = serializers.ListField(child=serializers.IntegerField(min_value=1, max_value=2**62), required=False,
                                  max_length=20, help_text="Ids of this session's uploaded files (RUN-13).")


class FileUploadIn(serializers.Serializer):
    file = serializers.FileField(allow_empty_file=True, use_url=False)


class FileOut(serializers.ModelSerializer):
    # The file's own address: GET downloads it, DELETE removes it while it is unsent.
    url = serializers.SerializerMethodField()

    class Meta:
        model = SessionFile
        fields = ["id", "name", "content_type", "size", "url"]

    def get_url(self, file: SessionFile) -> str:
        return reverse("file-download", args=[file.pk])


class RecordsQueryIn(serializers.Serializer):
    after = serializers.IntegerField(min_value=0, default=0, max_value=2**62)
    limit = serializers.IntegerField(min_value=1, max_value=RECORDS_PAGE_MAX, default=RECORDS_PAGE_DEFAULT)
    instance = serializers.CharField(required=False, max_length=32)

    def validate_instance(self, value: str) -> str:
        # "main" or an id; anything else ("²" passes str.isdigit) never reaches the query.
        if value != "main" and not id_from_text(value):
            raise serializers.ValidationError("use main or a sub-instance id of this session")
        return value


class RunBriefOut(serializers.ModelSerializer):
    class Meta:
        model = Run
        fields = ["id", "status", "created_at"]


class WaitingCallOut(serializers.Serializer):
    """TOOL-8: a call the run waits on, as its approval request shows it."""

    call_id = serializers.CharField()
    tool = serializers.CharField()
    label = serializers.CharField()
    arguments = serializers.JSONField(help_text="As stored: secrets redacted.")
    why = serializers.CharField()
    requested_at = serializers.DateTimeField(source="created_at")


class RunOut(serializers.ModelSerializer):
    session = serializers.IntegerField(source="session_id")
    version = serializers.IntegerField(source="version_id")
    waiting_for = serializers.SerializerMethodField(
        help_text="While the run is `waiting` (TOOL-8): the calls that wait for the session creator's decision "
                  "(`POST /api/v1/runs/{id}/approvals`). Empty otherwise.")

    class Meta:
        model = Run
        fields = ["id", "session", "version", "status", "waiting_reason", "not_before", "error", "counters", "attempt",
                  "cancel_requested", "waiting_for", "created_at", "started_at", "finished_at"]

    @extend_schema_field(WaitingCallOut(many=True))
    def get_waiting_for(self, run: Run) -> list[dict]:
        if run.status != Run.Status.WAITING:  # no query for every other run
            return []
        return WaitingCallOut(approvals_waiting(run=run), many=True).data


class SessionOut(serializers.ModelSerializer):
    agent = serializers.IntegerField(source="agent_id")
    version = serializers.IntegerField(source="version_id")
    agent_name = serializers.CharField(source="agent.name")
    version_number = serializers.IntegerField(source="version.version")

    class Meta:
        model = Session
        fields = ["id", "agent", "agent_name", "version", "version_number", "title", "created_at", "updated_at"]


class PreparedSummaryOut(serializers.Serializer):
    """CTX-45: a summary ready for the next compaction, or one being prepared; never its text."""

    # A plain string in the schema: an enum named "status" would collide with the runs' one.
    status = serializers.CharField(help_text='"ready" or "preparing".')
    ready_at = serializers.DateTimeField(allow_null=True)


class SessionDetailOut(SessionOut):
    runs = RunBriefOut(many=True, read_only=True)
    prepared_summary = serializers.SerializerMethodField()

    class Meta(SessionOut.Meta):
        fields = [*SessionOut.Meta.fields, "runs", "prepared_summary"]

    @extend_schema_field(PreparedSummaryOut(allow_null=True))
    def get_prepared_summary(self, session: Session) -> dict[str, Any] | None:
        state = prepared_summary_state(session=session)
        return PreparedSummaryOut(state).data if state is not None else None


class RecordOut(serializers.ModelSerializer):
    run_id = serializers.IntegerField()
    instance = serializers.SerializerMethodField()
    message = serializers.JSONField()

    class Meta:
        model = SessionMessage
        fields = ["seq", "run_id", "instance", "kind", "message", "created_at"]

    def get_instance(self, record: SessionMessage) -> str:
        return instance_label(record)
