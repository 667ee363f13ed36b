"""Sessions, runs, instances and the encrypted, append-only source records (SPEC §2, §6),
one module per entity; every model is imported here, so the app's models stay where Django
looks for them (the app label ``agent_sessions``, no migration moved).

Content (records, frames, snapshots, views, events, model requests, session titles, run
counters) is encrypted; what we filter and sort on (ids, seq, run, instance, kind, time)
stays in plain indexed columns.
"""
from sessions.models.approvals import ToolApproval
from sessions.models.audit import AccessAudit
from sessions.models.call_log import ModelCall, SentBlob
from sessions.models.inputs import ToolInput
from sessions.models.records import CompactionSnapshot, MessageKind, PreparedCompaction, SessionMessage, SessionView
from sessions.models.run import RUN_TRANSITIONS, Instance, Run, RunAttention, RunEvent
from sessions.models.session import Session, SessionFile

__all__ = [
    "RUN_TRANSITIONS", "AccessAudit", "CompactionSnapshot", "Instance", "MessageKind", "ModelCall",
    "PreparedCompaction", "Run", "RunAttention", "RunEvent", "SentBlob", "Session", "SessionFile",
    "SessionMessage", "SessionView", "ToolApproval", "ToolInput",
]
