"""The only place the toolkit reads the environment: the two variables injected into every governed
service and the switch that turns governance off."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from .connection import GovdbConnection, parse_connection
from .errors import GovdbConnectionError

#: values of BERTH_GOVERNANCE that turn the toolkit into a no-op
OFF_VALUES = frozenset({"off", "0", "false", "no", "disabled", "noop"})


@dataclass(frozen=True)
class GovernanceEnv:
    #: GOVDB_CONNECTION, None when unset or empty
    connection: str | None
    #: GOVERNANCE_PROJECT, None when unset or empty
    project: str | None
    #: BERTH_GOVERNANCE=off (also 0, false, no, disabled, noop): run without governance
    off: bool


def read_env(env: Mapping[str, str] | None = None) -> GovernanceEnv:
    """Reads the variables from ``env`` (default os.environ)."""
    source: Mapping[str, str] = os.environ if env is None else env

    def value(name: str) -> str | None:
        v = source.get(name)
        if v is None:
            return None
        v = v.strip()
        return v if v != "" else None

    mode = value("BERTH_GOVERNANCE")
    return GovernanceEnv(
        connection=value("GOVDB_CONNECTION"),
        project=value("GOVERNANCE_PROJECT"),
        off=mode is not None and mode.lower() in OFF_VALUES,
    )


def resolve_connection(explicit: str | GovdbConnection | None, env: GovernanceEnv) -> GovdbConnection:
    """The connection from an explicit value or GOVDB_CONNECTION; GovdbConnectionError when missing or malformed."""
    if isinstance(explicit, GovdbConnection):
        return explicit
    raw = explicit if explicit is not None else env.connection
    if raw is None or raw.strip() == "":
        raise GovdbConnectionError(
            "missing",
            "GOVDB_CONNECTION is not set: the service has no governance credential. Deploy it through Berth (which injects the variable), "
            'pass configure(connection=...), or run without governance with BERTH_GOVERNANCE=off or configure(mode="noop").',
        )
    return parse_connection(raw)
