"""A run's bounds have one typed home (issue #46, LOOP-2, RUN-3): ``agents.run_limits``."""
from __future__ import annotations

from dataclasses import FrozenInstanceError, fields

import pytest

from agents.forms import LIMIT_FIELDS
from agents.run_limits import DEFAULT, SETTABLE, RunLimits
from agents.services import agent_limits_normalize
from core.errors import ValidationFailed


def test_the_defaults_are_the_platforms():
    assert RunLimits() == RunLimits(max_model_calls=25, max_tool_calls=50, max_wall_seconds=900, max_depth=2,
                                    max_sub_instances=8)
    with pytest.raises(FrozenInstanceError):
        DEFAULT.max_depth = 3  # type: ignore[misc]


def test_a_frozen_object_overrides_only_what_it_names_and_ignores_what_is_gone():
    limits = RunLimits.from_dict({"max_model_calls": 3, "max_depth": None, "max_retired_bound": 7})
    assert limits == RunLimits(max_model_calls=3)
    assert RunLimits.from_dict(None) == DEFAULT


def test_it_says_which_bound_a_run_reached():
    limits = RunLimits(max_model_calls=3, max_tool_calls=5, max_wall_seconds=60)
    assert limits.reached(model_calls=2, tool_calls=4, seconds=60.0) is None
    assert limits.reached(model_calls=3, tool_calls=0, seconds=0) == "The run reached its limit of 3 model calls."
    assert limits.reached(model_calls=0, tool_calls=5, seconds=0) == "The run reached its limit of 5 tool calls."
    assert limits.reached(model_calls=0, tool_calls=0, seconds=60.5) == \
        "The run reached its time limit of 60 seconds."


def test_every_settable_bound_is_a_field_and_an_input_of_the_console_and_the_api():
    names = {f.name for f in fields(RunLimits)}
    assert set(SETTABLE) <= names
    assert tuple(LIMIT_FIELDS) == SETTABLE
    assert agent_limits_normalize(dict.fromkeys(SETTABLE, 4)) == dict.fromkeys(SETTABLE, 4)
    with pytest.raises(ValidationFailed):  # the fan-out guard is the platform's, not an admin's
        agent_limits_normalize({"max_sub_instances": 4})
