"""The plain path: configure() once at boot, submit() after each LLM call. These functions use one
Governance per process; create a Governance yourself to hold several."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from .errors import GovdbConnectionError
from .governance import Governance, GovernanceStats
from .queue import default_logger

_lock = threading.RLock()
_current: Governance | None = None
_warned_unconfigured = False


def configure(connection: Any = None, project: str | None = None, **options: Any) -> Governance:
    """Configures the toolkit from GOVDB_CONNECTION and GOVERNANCE_PROJECT (or the arguments) and
    fetches the app's config (blocking until the first attempt has an answer). Once per process:
    later calls return the same Governance (call shutdown() first to configure again). Raises
    GovdbConnectionError when the variable is missing or malformed (unless in no-op mode), and
    GovernanceConfigError when ``require_config`` is set and the config cannot be fetched."""
    global _current
    with _lock:
        if _current is not None:
            return _current
        g = Governance(connection, project, **options)
        _current = g
        try:
            g.start()
        except BaseException:
            _current = None
            g.shutdown(0)
            raise
        return g


def governance() -> Governance:
    """The process's Governance, configured from the environment on first use if configure() was not
    called (the config fetch then runs in the background). Raises GovdbConnectionError when
    GOVDB_CONNECTION is missing or malformed and governance is not off."""
    global _current
    with _lock:
        if _current is None:
            g = Governance()
            _current = g
            # require_config is off: a failed fetch falls back to the defaults
            g.start_in_background()
        return _current


def submit(trace: Mapping[str, Any], *, project: str | None = None) -> str | None:
    """Queues one trace for background delivery and returns its traceId. Never raises and never
    waits (usable from async code as is); see Governance.submit."""
    global _warned_unconfigured
    try:
        g = governance()
    except Exception as err:  # noqa: BLE001 - submit() never raises into the service
        with _lock:
            warn = not _warned_unconfigured
            _warned_unconfigured = True
        if warn:
            default_logger.warn(
                f"berth governance: traces are not recorded: {err if isinstance(err, GovdbConnectionError) else repr(err)}",
                {"code": "BERTH_GOVERNANCE_UNCONFIGURED"},
            )
        return None
    return g.submit(trace, project=project)


def flush(timeout: float = 10.0) -> bool:
    """True once every trace submitted so far is delivered, False after ``timeout`` seconds."""
    g = _current
    return g.flush(timeout) if g is not None else True


def shutdown(timeout: float | None = None) -> bool:
    """Flushes, then stops the process's Governance; configure() may be called again afterwards."""
    global _current
    with _lock:
        g = _current
        _current = None
    return g.shutdown(timeout) if g is not None else True


def stats() -> GovernanceStats | None:
    """The counters of the process's Governance; None before it is configured."""
    g = _current
    return g.stats() if g is not None else None
