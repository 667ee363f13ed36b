"""The console's plain-Python presentation: literal inputs, exact outputs (STYLE 1)."""
from __future__ import annotations

import re
from datetime import UTC, datetime

from sessions.admin.chart import ChartPoint, compaction_chart, nice_step, tokens_label
from sessions.admin.display import (
    call_figures,
    compaction_figures,
    content_text,
    message_view,
    sent_messages,
    text,
)
from sessions.admin.timeline import timeline
from sessions.selectors.model_calls import SentEntry

AT = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)


def point(n: int, before: int | None, after: int | None, threshold: int | None = 80_000,
          target: int | None = 40_000) -> ChartPoint:
    return ChartPoint(label=f"#{n}", when=f"30 Nov 10:0{n}", trigger="budget", before=before, after=after,
                      threshold=threshold, target=target)


def test_nice_steps_and_short_labels():
    assert [nice_step(v) for v in (95_000, 9, 1_000_000, 0)] == [20_000, 2, 200_000, 1.0]
    assert [tokens_label(v) for v in (0, 950, 12_000, 1_500, 2_000_000)] == ["0", "950", "12k", "1.5k", "2M"]


def test_the_chart_draws_one_polyline_per_series_and_a_marker_per_measured_point():
    svg = compaction_chart([point(1, 90_000, 30_000), point(2, 85_000, 35_000), point(3, 88_000, 36_000)])
    for series in ("before", "after", "threshold", "target"):
        assert len(re.findall(rf'<polyline class="series series-{series}"', svg)) == 1
    assert len(re.findall(r'class="marker marker-before"', svg)) == 3
    # Levels are steps across each compaction's slot: two points per compaction.
    threshold = re.search(r'series-threshold" fill="none" points="([^"]+)"', svg).group(1)
    assert len(threshold.split()) == 6 and len({p.split(",")[1] for p in threshold.split()}) == 1
    assert svg.startswith('<svg class="compaction-chart"') and 'role="img"' in svg


def test_a_missing_figure_breaks_the_line_instead_of_bridging_it():
    svg = compaction_chart([point(1, 90_000, 30_000), point(2, None, None), point(3, 88_000, 36_000)])
    assert len(re.findall(r'series-before" fill="none"', svg)) == 2
    assert len(re.findall(r'class="marker marker-before"', svg)) == 2


def test_the_chart_escapes_its_texts_and_is_empty_without_points():
    hostile = ChartPoint(label="<b>#1</b>", when="<script>", trigger="<img>", before=1, after=1, threshold=None,
                         target=None)
    svg = compaction_chart([hostile], title="A & B")
    assert "<script>" not in svg and "&lt;script&gt;" in svg and "&lt;b&gt;#1&lt;/b&gt;" in svg
    assert "A &amp; B" in svg
    assert compaction_chart([]) == ""


def test_deltas_fold_by_kind_and_instance_and_other_events_keep_their_fields():
    rows = timeline([
        (1, "run_started", AT, {"attempt": 0}),
        (2, "message_delta", AT, {"instance": "main", "text": "Hel"}),
        (3, "message_delta", AT, {"instance": "main", "text": "lo"}),
        (4, "message_delta", AT, {"instance": "7", "text": "sub"}),
        (5, "thinking_delta", AT, {"instance": "7", "text": "hm"}),
        (6, "tool_finished", AT, {"name": "calculator", "status": "ok", "duration_ms": 3}),
    ])
    assert [(r.type, r.first_seq, r.last_seq, r.count) for r in rows] == [
        ("run_started", 1, 1, 1), ("message_delta", 2, 3, 2), ("message_delta", 4, 4, 1),
        ("thinking_delta", 5, 5, 1), ("tool_finished", 6, 6, 1)]
    assert rows[1].text.head == "Hello" and rows[1].fields == (("instance", "main"),)
    assert rows[4].fields == (("name", "calculator"), ("status", "ok"), ("duration_ms", "3"))
    assert rows[4].full_json is None and rows[4].tone == "tool"


def test_long_texts_are_cut_near_a_line_end_and_keep_the_whole():
    short = text("abc")
    assert (short.head, short.full, short.chars) == ("abc", None, 3)
    long = text("x" * 1400 + "\n" + "y" * 500)
    assert long.head == "x" * 1400 + " …" and long.full == "x" * 1400 + "\n" + "y" * 500 and long.chars == 1901


def test_messages_read_as_people_expect():
    assistant = message_view({"role": "assistant", "content": "Partial", "partial": True, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "calc", "arguments": "{\"a\": 1}"}}]}, kind="assistant")
    assert assistant.role == "assistant" and assistant.badges == ("interrupted",)
    assert assistant.tool_calls[0].name == "calc" and assistant.tool_calls[0].arguments.head == '{\n  "a": 1\n}'
    status = message_view({"status": "cancelled", "reason": "stopped by user"}, kind="run_status")
    assert (status.role, status.status, status.texts[0].head) == ("run status", "cancelled", "stopped by user")
    command = message_view({"command": "ls", "exit_code": 2, "output": "nope", "exclude": True}, kind="command")
    assert (command.status, command.badges, command.texts[0].head) == ("exit 2", ("excluded from the model",), "$ ls")
    label = message_view({"label": "checkpoint A"}, kind="label")
    assert label.role == "label" and '"label": "checkpoint A"' in label.texts[0].head
    assert message_view({"role": "assistant", "content": None}).texts[0].head == "(empty)"


def test_content_parts_keep_text_and_name_images():
    parts = [{"type": "text", "text": "What is this?"},
             {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 4096}}]
    assert content_text(parts) == "What is this?\n[image: image/png, 3 KB inline]"


def test_call_figures_put_the_providers_count_beside_the_estimate():
    figures = call_figures(estimated=1000, usage={"prompt_tokens": 1250, "completion_tokens": 9}, estimates=[10, 990])
    assert (figures.prompt_tokens, figures.completion_tokens, figures.ratio, figures.per_message_sum) == (
        1250, 9, 1.25, 1000)
    assert figures.ratio_tone == "under"
    none = call_figures(estimated=0, usage=None, estimates=[])
    assert (none.prompt_tokens, none.ratio, none.per_message_sum, none.ratio_tone) == (None, None, None, "")


def test_sent_messages_without_estimates_still_show_every_message():
    sent = sent_messages([SentEntry({"role": "system", "content": "s"}, None),
                          SentEntry({"role": "user", "content": "u"}, None)])
    assert [(m.index, m.estimate, m.view.role) for m in sent] == [(0, None, "system"), (1, None, "user")]


def test_compaction_figures_tolerate_missing_and_odd_values():
    figures = compaction_figures({"trigger": "manual", "tokens_before": {"estimated": 1000, "calibrated": 1100},
                                  "tokens_after": 250, "segments": [{"consumed": [3, 9]}, {"consumed": None}],
                                  "target_reached": "yes"}, estimator_id="bytes-v1")
    # A snapshot from before one name per meaning: its pair and its bare figure still read.
    assert (figures.trigger, figures.tokens_before_calibrated, figures.tokens_before_estimated,
            figures.tokens_after_calibrated, figures.tokens_after_estimated, figures.saved_percent) == (
        "manual", 1100, 1000, 250, 250, 77)
    assert figures.target_reached is None and figures.estimator_id == "bytes-v1" and figures.duration_text == "–"
    assert [(s.index, s.first_seq, s.last_seq) for s in figures.segments] == [(0, 3, 9), (1, None, None)]
    assert compaction_figures(None).trigger == "?"
