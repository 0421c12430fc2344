from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from stand_in_api import StandInApi

import berth_toolkit
from berth_toolkit import Governance


class Warnings:
    def __init__(self) -> None:
        self.lines: list[tuple[str, dict[str, Any]]] = []

    def warn(self, message: str, details: Any) -> None:
        self.lines.append((message, dict(details)))

    def codes(self) -> list[str]:
        return [d.get("code", "") for _, d in self.lines]


@pytest.fixture
def warnings_() -> Warnings:
    return Warnings()


@pytest.fixture
def api() -> Iterator[StandInApi]:
    a = StandInApi()
    yield a
    a.close()


@pytest.fixture
def redact_api() -> Iterator[StandInApi]:
    a = StandInApi(pii="redact")
    yield a
    a.close()


@pytest.fixture
def make_governance(warnings_: Warnings) -> Iterator[Any]:
    made: list[Governance] = []

    def make(api: StandInApi, **options: Any) -> Governance:
        options.setdefault("linger", 0.01)
        options.setdefault("initial_backoff", 0.02)
        options.setdefault("max_backoff", 0.05)
        options.setdefault("logger", warnings_)
        options.setdefault("flush_at_exit", False)
        g = Governance(env={"GOVDB_CONNECTION": api.connection, "GOVERNANCE_PROJECT": api.project}, **options)
        made.append(g)
        return g

    yield make
    for g in made:
        g.shutdown(1)
    berth_toolkit.shutdown(0)
