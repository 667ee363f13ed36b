"""CTX-20 to CTX-23 (policy, budget, triggers, counters) and CTX-40 (legacy policy)."""

from __future__ import annotations

import pytest
from recordkit import assistant, record, user

from context import Budget, ContextPolicy, Counters, LegacyCharPolicy, PolicyError, evaluate_triggers


def test_ctx20_the_default_policy_is_80_60_with_four_compaction_calls() -> None:
    assert ContextPolicy().to_dict() == {"context_ratio": 0.8, "target_ratio": 0.6, "user_turns": None,
                                         "model_steps": None, "max_compaction_calls": 4, "prepare_ratio": None,
                                         "mask_tool_results": True}


def test_ctx20_from_dict_fills_defaults_for_missing_fields() -> None:
    assert ContextPolicy.from_dict({"user_turns": 5}).to_dict() == {
        "context_ratio": 0.8, "target_ratio": 0.6, "user_turns": 5, "model_steps": None, "max_compaction_calls": 4,
        "prepare_ratio": None, "mask_tool_results": True}
    assert ContextPolicy.from_dict(None) == ContextPolicy()


def test_ctx47_a_version_stored_before_masking_existed_masks_by_default_and_false_turns_it_off() -> None:
    stored = {"context_ratio": 0.8, "target_ratio": 0.6, "user_turns": None, "model_steps": None,
              "max_compaction_calls": 4, "prepare_ratio": None}  # a version published before CTX-47
    assert ContextPolicy.from_dict(stored).mask_tool_results is True
    assert ContextPolicy.from_dict({"mask_tool_results": False}).to_dict()["mask_tool_results"] is False


@pytest.mark.parametrize("data, fields", [
    ({"context_ratio": 0}, {"context_ratio"}),
    ({"context_ratio": 1.01}, {"context_ratio"}),
    ({"target_ratio": 0.8}, {"target_ratio"}),
    ({"target_ratio": 0.9, "context_ratio": 0.85}, {"target_ratio"}),
    ({"target_ratio": 0}, {"target_ratio"}),
    ({"context_ratio": "0.8"}, {"context_ratio"}),
    ({"context_ratio": True}, {"context_ratio"}),
    ({"user_turns": 0}, {"user_turns"}),
    ({"model_steps": 2.0}, {"model_steps"}),
    ({"model_steps": True}, {"model_steps"}),
    ({"max_compaction_calls": 0}, {"max_compaction_calls"}),
    ({"max_compaction_calls": 17}, {"max_compaction_calls"}),
    ({"max_compaction_calls": False}, {"max_compaction_calls"}),
    ({"user_turns": -1, "max_compaction_calls": 99}, {"user_turns", "max_compaction_calls"}),
    ({"context_ratios": 0.8}, {"context_ratios"}),
    ({"prepare_ratio": 0.6}, {"prepare_ratio"}),  # CTX-45: strictly between target and trigger
    ({"prepare_ratio": 0.8}, {"prepare_ratio"}),
    ({"prepare_ratio": "0.7"}, {"prepare_ratio"}),
    ({"prepare_ratio": True}, {"prepare_ratio"}),
    ({"target_ratio": 0.9, "prepare_ratio": 0.95}, {"target_ratio"}),  # judged once its bounds are valid
    ({"mask_tool_results": "false"}, {"mask_tool_results"}),  # CTX-47: a boolean, never a string or number
    ({"mask_tool_results": 0}, {"mask_tool_results"}),
    ({"mask_tool_results": None}, {"mask_tool_results"}),
])
def test_ctx20_an_invalid_policy_names_every_bad_field(data: dict, fields: set) -> None:
    with pytest.raises(PolicyError) as caught:
        ContextPolicy.from_dict(data)
    assert set(caught.value.fields) == fields
    assert all(isinstance(why, str) and why for why in caught.value.fields.values())


def test_ctx20_the_limits_themselves_are_valid() -> None:
    ContextPolicy(context_ratio=1, target_ratio=0.99, user_turns=1, model_steps=1, max_compaction_calls=16)
    ContextPolicy(max_compaction_calls=1)


def test_ctx45_a_summary_is_prepared_halfway_between_target_and_trigger_unless_the_policy_says() -> None:
    budget = Budget.platform_default()
    assert budget.prepare_threshold(ContextPolicy()) == pytest.approx(27_648 * 0.7)
    assert budget.prepare_threshold(ContextPolicy(prepare_ratio=0.75)) == pytest.approx(27_648 * 0.75)
    policy = ContextPolicy(context_ratio=0.9, target_ratio=0.5)
    assert budget.target_tokens(policy) < budget.prepare_threshold(policy) < budget.trigger_threshold(policy)


def test_ctx21_the_platform_fallback_gives_27648_input_and_a_trigger_near_22118() -> None:
    budget = Budget.platform_default()
    assert (budget.context_window, budget.max_output_tokens, budget.safety_margin_tokens) == (32_768, 4_096, 1_024)
    assert budget.effective_input == 27_648
    assert budget.trigger_tokens(ContextPolicy()) == 22_118
    assert budget.trigger_threshold(ContextPolicy()) == pytest.approx(22_118.4)
    assert budget.target_tokens(ContextPolicy()) == 16_588


def test_ctx21_a_budget_with_no_room_for_input_is_refused_naming_the_field() -> None:
    with pytest.raises(PolicyError) as caught:
        Budget(context_window=4_096, max_output_tokens=4_096, safety_margin_tokens=0)
    assert set(caught.value.fields) == {"max_output_tokens"}


def test_ctx22_the_budget_trigger_fires_at_the_threshold_not_below() -> None:
    policy, budget = ContextPolicy(), Budget()
    assert evaluate_triggers(policy=policy, budget=budget, estimated_tokens=22_118, counters=Counters()).fired == ()
    fired = evaluate_triggers(policy=policy, budget=budget, estimated_tokens=22_119, counters=Counters())
    assert fired.fired == ("budget",) and fired


def test_ctx22_any_trigger_suffices_and_every_one_that_fired_is_named() -> None:
    policy = ContextPolicy(user_turns=3, model_steps=10)
    counters = Counters(user_turns=8, model_steps=25, baseline_user_turns=5, baseline_model_steps=15)
    result = evaluate_triggers(policy=policy, budget=Budget(), estimated_tokens=30_000, counters=counters)
    assert result.fired == ("budget", "user_turns", "model_steps")
    quiet = Counters(user_turns=7, model_steps=24, baseline_user_turns=5, baseline_model_steps=15)
    assert not evaluate_triggers(policy=policy, budget=Budget(), estimated_tokens=10, counters=quiet)


def test_ctx23_counts_move_by_question_and_step_and_baselines_move_after_compaction() -> None:
    counters = Counters().with_user_turn().with_model_step().with_model_step()
    assert counters == Counters(user_turns=1, model_steps=2)
    assert counters.after_compaction() == Counters(1, 2, 1, 2)


def test_ctx23_counting_from_records_skips_supplements_cut_streams_summaries_and_sub_instances() -> None:
    records = [
        user(1, "Q1"),
        record(2, "supplement", {"role": "user", "content": "also"}),
        assistant(3, "step"),
        assistant(4, "cut", partial=True),
        record(5, "assistant", {"role": "assistant", "content": "checked", "purpose": "verification"}),
        record(6, "assistant", {"role": "assistant", "content": "sub"}, instance="sub-1"),
        user(7, "Q2", run="r2"),
        assistant(8, "step", run="r2"),
    ]
    assert Counters.from_records(records, baseline_user_turns=1) == Counters(2, 2, 1, 0)
    assert Counters.from_records(records, instance="sub-1") == Counters(0, 1)


def test_ctx40_the_legacy_policy_keeps_the_newest_whole_groups_under_the_limit() -> None:
    system = {"role": "system", "content": "rules"}
    old_q = {"role": "user", "content": "x" * 50}
    group = [{"role": "assistant", "content": None,
              "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
             {"role": "tool", "tool_call_id": "c1", "content": "y" * 20}]
    new_q = {"role": "user", "content": "z" * 10}
    messages = [system, old_q, *group, new_q]
    assert LegacyCharPolicy(char_limit=40).select(messages) == [system, *group, new_q]
    assert LegacyCharPolicy(char_limit=30).select(messages) == [system, new_q]
    assert LegacyCharPolicy(char_limit=5).select(messages) == [system, new_q]  # the newest always stays
    assert LegacyCharPolicy(char_limit=1000).select(messages) == messages
