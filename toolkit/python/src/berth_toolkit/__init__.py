"""Berth client toolkit for Python.

The plain path: ``configure()`` once at boot, ``submit(trace)`` after each LLM call; traces are
delivered in the background. The LangChain wrapper is ``berth_toolkit.langchain`` (it needs the
``langchain`` extra). Guards run in the Berth API (``Governance.check``), with the app's config.
"""

from ._version import __version__
from .client import configure, flush, governance, shutdown, stats, submit
from .config import GovernanceEnv, read_env
from .connection import APP_KEY_PREFIX, GovdbConnection, is_cluster_local, is_loopback, parse_connection
from .errors import (
    GovdbConnectionError,
    GovernanceConfigError,
    GovernanceError,
    GuardBlockedError,
    GuardUnavailableError,
)
from .governance import Governance, GovernanceMode, GovernanceStats, OnGuardError
from .guards import (
    DEFAULT_PHASES,
    GuardBlock,
    GuardCheck,
    GuardDecision,
    GuardEvaluation,
    Phase,
    guard_checks,
    stream_strategy,
)
from .queue import GovernanceLogger, QueueStats, TraceQueue, backoff_delay
from .trace import MAX_BATCH_SIZE, Trace, TraceTokens, to_record, trace_problems
from .transport import HttpTransport, ToolkitConfig, parse_retry_after

__all__ = [
    "APP_KEY_PREFIX",
    "DEFAULT_PHASES",
    "MAX_BATCH_SIZE",
    "GovdbConnection",
    "GovdbConnectionError",
    "Governance",
    "GovernanceConfigError",
    "GovernanceEnv",
    "GovernanceError",
    "GovernanceLogger",
    "GovernanceMode",
    "GovernanceStats",
    "GuardBlock",
    "GuardBlockedError",
    "GuardCheck",
    "GuardDecision",
    "GuardEvaluation",
    "GuardUnavailableError",
    "HttpTransport",
    "OnGuardError",
    "Phase",
    "QueueStats",
    "ToolkitConfig",
    "Trace",
    "TraceQueue",
    "TraceTokens",
    "__version__",
    "backoff_delay",
    "configure",
    "flush",
    "governance",
    "guard_checks",
    "is_cluster_local",
    "is_loopback",
    "parse_connection",
    "parse_retry_after",
    "read_env",
    "shutdown",
    "stats",
    "stream_strategy",
    "submit",
    "to_record",
    "trace_problems",
]
