"""Reads of a run's instances: the main one, the tool group in flight, the sub-agents
still working, the latest snapshot. Nothing here writes."""
from __future__ import annotations

from typing import Any

from context import CallStates, tool_call_states
from core.api.fields import id_from_text
from sessions.models import CompactionSnapshot, Instance, Run, Session, SessionMessage
from sessions.selectors.records import visible_records_for_engine


def instance_in_session(*, session: Session, instance: str) -> bool:
    if instance == Instance.MAIN:
        return True
    instance_id = id_from_text(instance)  # ASCII digits only: "²".isdigit() is True and int() refuses it
    return instance_id is not None and Instance.objects.filter(pk=instance_id, run__session=session).exists()



def main_instance(*, run: Run) -> Instance:
    return Instance.objects.get(run=run, key=Instance.MAIN)


def calls_pending(*, instance: Instance) -> list[dict[str, Any]]:
    """The tool group in flight: calls of the instance's last step without a saved result,
    as ``{"id", "name", "arguments"}`` (RUN-7 refuses a view while there are any; CTX-36
    shows them). Read from the records: results are keyed ``result-<step>-<index>`` after
    their step's ``assistant-<step>``."""
    last = (SessionMessage.objects.filter(instance=instance, kind="assistant", entry_key__startswith="assistant-")
            .order_by("-seq").first())
    if last is None or not last.message.get("tool_calls"):
        return []
    step = last.entry_key.removeprefix("assistant-")
    done = set(SessionMessage.objects.filter(instance=instance, entry_key__startswith=f"result-{step}-")
               .values_list("entry_key", flat=True))
    pending = []
    for index, call in enumerate(last.message["tool_calls"]):
        if f"result-{step}-{index}" not in done:
            function = call.get("function") or {}
            pending.append({"id": str(call.get("id", "")), "name": str(function.get("name", "")),
                            "arguments": str(function.get("arguments", ""))})
    return pending


def sub_instances_running(*, instance: Instance) -> list[dict[str, Any]]:
    """Sub-agents ``instance`` delegated to that have no delegation result yet (CTX-36):
    ``{"id", "task", "status"}``. A sub-instance is keyed ``sub-<parent>-<step>-<index>``
    and its result ``result-<step>-<index>`` in the parent (see the run loop's tool calls)."""
    running = []
    for child in Instance.objects.filter(parent=instance).order_by("id").defer("frame"):
        step_and_index = child.key.removeprefix(f"sub-{instance.pk}-")
        if SessionMessage.objects.filter(instance=instance, entry_key=f"result-{step_and_index}").exists():
            continue
        task = SessionMessage.objects.filter(instance=child, kind="user").order_by("seq").first()
        running.append({"id": str(child.pk), "status": "running",
                        "task": (task.message.get("content") if task else "") or ""})
    return running



def tool_calls_unsettled(*, run: Run, instance: Instance) -> CallStates:
    """CTX-36: the instance's calls still pending and those whose outcome is unknown, read
    from every record its context is built from (not from its view, which a compaction
    may have summarized them out of), judged as the run's projection judges them (the
    run is the open one). Each call once, under the id its record holds."""
    return tool_call_states(visible_records_for_engine(run=run, instance=instance), open_runs={run.pk})


def snapshot_latest(*, instance: Instance) -> CompactionSnapshot | None:
    return instance.snapshots.order_by("-revision").first()
