"""Installing AgentLoom prints no packaging warnings a new user would have to wonder about.

setuptools deprecated `project.license` as a TOML table (every `make run` printed a
warning block about it); the SPDX string form needs setuptools 77 or newer in the build
environment, so the two must change together.
"""
from __future__ import annotations

import re
import tomllib

from tests.conftest import REPO


def pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def test_the_license_is_an_spdx_string_and_the_build_backend_can_read_it():
    data = pyproject()
    assert isinstance(data["project"]["license"], str), "a TOML table here is deprecated by setuptools"
    requires = " ".join(data["build-system"]["requires"])
    match = re.search(r"setuptools>=(\d+)", requires)
    assert match and int(match.group(1)) >= 77, f"SPDX license strings need setuptools>=77, got {requires!r}"
