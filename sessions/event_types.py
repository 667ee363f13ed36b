"""The names of a run's events (LOOP-5): one home, read by the event log and by the chat.

``sessions.services.events`` refuses any other name; the chat page is handed this table
(``web.views``: ``config.events``, member name → wire name) and its script switches on
``EVENT.RUN_STARTED`` and so on, never on a name of its own, so adding or renaming an
event is a change here (and in what handles it), not a second list in JavaScript.
"""
from __future__ import annotations

from enum import StrEnum


class EventType(StrEnum):
    RUN_STARTED = "run_started"
    MESSAGE_DELTA = "message_delta"
    THINKING_DELTA = "thinking_delta"
    TOOL_CALL_DETECTED = "tool_call_detected"
    TOOL_STARTED = "tool_started"
    TOOL_FINISHED = "tool_finished"
    TOOL_PROGRESS = "tool_progress"  # a server tool's progress notification (TOOL-4), shown on its step
    SUPPLEMENT_RECEIVED = "supplement_received"
    COMPACTION_STARTED = "compaction_started"
    COMPACTION_PROGRESS = "compaction_progress"
    COMPACTION_SKIPPED = "compaction_skipped"
    COMPACTION_FAILED = "compaction_failed"
    COMPACTED = "compacted"
    # CTX-45: a summary is being prepared in the background / is ready for the trigger.
    COMPACTION_PREPARING = "compaction_preparing"
    COMPACTION_PREPARED = "compaction_prepared"
    SUB_INSTANCE_STARTED = "sub_instance_started"
    SUB_INSTANCE_FINISHED = "sub_instance_finished"
    RUN_FINISHED = "run_finished"
    # A run's error, or a retry of a provider fault (its data has ``retrying_in``). Never
    # ``error``: a browser's EventSource would also call its connection-lost handler.
    RUN_ERROR = "run_error"
    PLAN_UPDATED = "plan_updated"  # the agent's plan changed (update_plan); the chat shows it beside the run
    CONTEXT_MEASURED = "context_measured"  # how full the main context is after a step: the chat's meter
    # A queued run waits for its person's (or space's) earlier runs to end (issue #44).
    RUN_WAITING = "run_waiting"
    # CAT-11: a model call waits for a free slot of its model server / has one now.
    MODEL_WAITING = "model_waiting"
    MODEL_WAITED = "model_waited"
    # CAT-10: the server cut the prompt without refusing; the answer is dropped, asked again.
    PROMPT_TRUNCATED = "prompt_truncated"
    # TOOL-8/9: a call waits for a person's approval / a person decided it.
    APPROVAL_REQUESTED = "approval_requested"
    APPROVAL_DECIDED = "approval_decided"
    # TOOL-10: a tool server asks the person during a call / the question was answered
    # (by the person, or by the wait's end: expired, stopped).
    INPUT_REQUESTED = "input_requested"
    INPUT_ANSWERED = "input_answered"


def event_names() -> dict[str, str]:
    """What the chat page is handed: each member's name → the name on the wire."""
    return {member.name: member.value for member in EventType}
