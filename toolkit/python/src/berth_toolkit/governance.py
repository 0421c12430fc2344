"""One service's connection to the governance layer: the app key and host from GOVDB_CONNECTION,
the app's guard chain as the config fetched at boot describes it, guard checks through the API,
and the background queue that delivers traces. A Governance is cheap to hold and never raises
from submit()."""

from __future__ import annotations

import asyncio
import atexit
import random as _random
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from .config import read_env, resolve_connection
from .connection import GovdbConnection
from .errors import GovernanceConfigError, GuardUnavailableError
from .guards import ALLOW, GuardCheck, GuardDecision, Phase, checks_on, guard_checks
from .queue import GovernanceLogger, LastError, QueueStats, SendOutcome, TraceQueue, backoff_delay, default_logger
from .trace import to_record, trace_problems
from .transport import ConfigOutcome, GuardCheckOutcome, HttpTransport, ToolkitConfig

GovernanceMode = Literal["on", "noop"]
OnGuardError = Literal["allow", "block"]
ConfigSource = Literal["api", "default", "none"]


class Transport(Protocol):
    """What a Governance needs from HTTP (HttpTransport; tests may pass their own)."""

    def send(self, body: bytes, count: int) -> SendOutcome: ...

    def cancel(self) -> None: ...

    def config(self) -> ConfigOutcome: ...

    def guard_check(self, text: str, phase: Phase, project: str | None, timeout: float) -> GuardCheckOutcome: ...


@dataclass(frozen=True)
class GovernanceStats:
    """The queue's counters (QueueStats), the mode, where the guard chain came from, and the guard
    checks that could not run."""

    queued: int
    submitted: int
    sent: int
    duplicates: int
    rejected: int
    dropped: int
    retries: int
    last_error: LastError | None
    mode: GovernanceMode
    #: where the guard chain came from: the API, or the defaults (the fetch failed)
    config: ConfigSource
    #: guard checks that could not run (the API did not answer) since start
    guards_unavailable: int = 0


class Governance:
    """Reads and checks the environment in the constructor (GovdbConnectionError), builds nothing
    remote. ``start()`` (or ``configure()``) fetches the config."""

    def __init__(
        self,
        connection: str | GovdbConnection | None = None,
        project: str | None = None,
        *,
        mode: GovernanceMode | None = None,
        require_config: bool = False,
        config_attempts: int = 5,
        guard_timeout: float = 2.0,
        on_guard_error: OnGuardError = "allow",
        flush_at_exit: bool = True,
        shutdown_timeout: float = 10.0,
        request_timeout: float = 10.0,
        max_queue: int = 10_000,
        batch_size: int = 500,
        max_batch_bytes: int = 1_000_000,
        linger: float = 0.25,
        initial_backoff: float = 0.5,
        max_backoff: float = 30.0,
        logger: GovernanceLogger | None = None,
        env: Mapping[str, str] | None = None,
        transport: Transport | None = None,
        random: Callable[[], float] | None = None,
    ) -> None:
        if on_guard_error not in ("allow", "block"):
            raise ValueError('on_guard_error must be "allow" or "block"')
        e = read_env(env)
        self.mode: GovernanceMode = mode if mode is not None else ("noop" if e.off else "on")
        self._project = project if project is not None else e.project
        self._require_config = require_config
        self._config_attempts = max(1, config_attempts)
        self._guard_timeout = guard_timeout
        self.on_guard_error: OnGuardError = on_guard_error
        self._shutdown_timeout = shutdown_timeout
        self._logger = logger or default_logger
        self._random = random or _random.random
        self._lock = threading.Lock()
        self._started = threading.Event()
        self._starting = False
        self._start_error: BaseException | None = None
        self._stop = threading.Event()
        self._shutdown_result: bool | None = None
        self._checks: tuple[GuardCheck, ...] = ()
        self._config_source: ConfigSource = "none"
        self._remote_config: ToolkitConfig | None = None
        self._guard_outage = False
        self._guards_unavailable = 0
        self._unguarded_in_outage = 0
        self._at_exit_registered = False
        #: the connection (host, database; the key is never printed); None in no-op mode
        self.connection: GovdbConnection | None = None
        self._transport: Transport | None = None
        self._queue: TraceQueue | None = None
        if self.mode == "noop":
            self._started.set()
            return
        self.connection = resolve_connection(connection, e)
        self._transport = transport or HttpTransport(self.connection, timeout=request_timeout)
        self._queue = TraceQueue(
            self._transport,
            max_queue=max_queue,
            batch_size=batch_size,
            max_batch_bytes=max_batch_bytes,
            linger=linger,
            initial_backoff=initial_backoff,
            max_backoff=max_backoff,
            logger=self._logger,
            random=self._random,
        )
        if flush_at_exit:
            atexit.register(self._at_exit)
            self._at_exit_registered = True

    # -- what it knows ---------------------------------------------------------------------

    @property
    def project(self) -> str | None:
        """GOVERNANCE_PROJECT (or the ``project`` option; else the project of the fetched config)"""
        return self._project

    @property
    def remote_config(self) -> ToolkitConfig | None:
        """The config as fetched from the API (None until then, and in no-op mode)."""
        return self._remote_config

    @property
    def checks(self) -> tuple[GuardCheck, ...]:
        """The app's guard chain (source, guard type, phases, action): from the config fetched at
        boot, or the default config while that fetch has not succeeded. Empty in no-op mode."""
        return self._checks

    # -- the config at boot ------------------------------------------------------------------

    def start(self) -> None:
        """Fetches the app's config. Returns after the first attempt: on failure the default config
        is used and the fetch is retried in the background (up to ``config_attempts`` in all),
        unless ``require_config``, where it raises GovernanceConfigError (every later call too).
        Idempotent and thread-safe: concurrent callers wait for the one attempt."""
        if self._started.is_set():
            if self._start_error is not None:
                raise self._start_error
            return
        with self._lock:
            first = not self._starting
            self._starting = True
        if not first:
            self._started.wait()
            if self._start_error is not None:
                raise self._start_error
            return
        try:
            self._start()
        except BaseException as err:
            self._start_error = err
            raise
        finally:
            self._started.set()

    async def astart(self) -> None:
        """start() without blocking the event loop (no thread once the config is loaded)."""
        if self._started.is_set():
            if self._start_error is not None:
                raise self._start_error
            return
        await asyncio.to_thread(self.start)

    def start_in_background(self) -> None:
        """start() on a daemon thread (the process Governance configured on first use)."""
        if self._started.is_set() or self._starting:
            return

        def run() -> None:
            try:
                self.start()
            except Exception:  # noqa: BLE001 - recorded; the callers of start() get it
                pass

        threading.Thread(target=run, name="berth-governance-config", daemon=True).start()

    def _start(self) -> None:
        if self.mode == "noop" or self._transport is None:
            return
        first = self._fetch_config()
        if first is None:
            return
        if self._require_config:
            raise GovernanceConfigError(f"could not load the governance config at boot: {first.error}", first.status)
        self._use_defaults(first)
        if first.retryable and self._config_attempts > 1:
            threading.Thread(target=self._retry_config, args=(first,), name="berth-governance-config", daemon=True).start()

    def _fetch_config(self) -> ConfigOutcome | None:
        """None when the config is loaded, else why not."""
        assert self._transport is not None
        try:
            outcome = self._transport.config()
        except Exception as err:  # noqa: BLE001 - a transport that raises is a failed attempt
            outcome = ConfigOutcome(ok=False, error=str(err) or type(err).__name__, retryable=True)
        if not outcome.ok or outcome.config is None:
            return outcome
        try:
            checks = guard_checks(outcome.config.engine)
        except Exception as err:  # noqa: BLE001 - a config we cannot read is not retried
            return ConfigOutcome(ok=False, error=f"the config cannot be read: {str(err)[:300]}")
        self._checks = checks
        self._remote_config = outcome.config
        self._config_source = "api"
        if self._project is None:
            self._project = outcome.config.project
        elif self._project != outcome.config.project:
            self._logger.warn(
                f"berth governance: GOVERNANCE_PROJECT is {self._project} but the key belongs to {outcome.config.project}; "
                "the API will refuse its traces",
                {"code": "BERTH_GOVERNANCE_PROJECT_MISMATCH"},
            )
        return None

    def _use_defaults(self, failure: ConfigOutcome) -> None:
        if self._config_source == "none":
            self._checks = guard_checks(None)
        self._config_source = "default"
        retrying = ", retrying in the background" if failure.retryable and self._config_attempts > 1 else ""
        self._logger.warn(
            f"berth governance: could not load the app's guards and evals config ({failure.error}); guarding with the default config{retrying}",
            {"code": "BERTH_GOVERNANCE_CONFIG", "status": failure.status},
        )

    def _retry_config(self, last: ConfigOutcome) -> None:
        for attempt in range(2, self._config_attempts + 1):
            delay = last.retry_after_ms if last.retry_after_ms is not None else backoff_delay(attempt - 1, 1000, 30_000, self._random)
            if self._stop.wait(delay / 1000):
                return
            failure = self._fetch_config()
            if failure is None:
                return
            last = failure
            if not failure.retryable:
                break
        if not self._stop.is_set():
            self._logger.warn(
                f"berth governance: gave up loading the governance config ({last.error}); the default config stays until the next restart",
                {"code": "BERTH_GOVERNANCE_CONFIG", "status": last.status},
            )

    # -- guard checks ------------------------------------------------------------------------

    def check(self, text: str, phase: Phase, *, project: str | None = None) -> GuardDecision:
        """The app's guards on one text of one phase, run by the API (POST /governance/guard-check).

        No request when no check of the app's chain runs on ``phase`` (the decision is then allow
        with no evaluations, what the engine gives). When the API cannot answer (network error,
        timeout, any status other than 2xx), ``on_guard_error`` decides: "allow" returns an allow
        decision whose ``unavailable`` says why (a warning is logged once per outage), "block"
        raises GuardUnavailableError. In no-op mode: allow. May raise GovernanceConfigError under
        ``require_config`` (fail closed)."""
        if self.mode == "noop" or self._transport is None:
            return ALLOW
        self.start()
        if not checks_on(self._checks, phase):
            return ALLOW
        try:
            outcome = self._transport.guard_check(text, phase, project or self._project, self._guard_timeout)
        except Exception as err:  # noqa: BLE001 - a transport that raises is a failed check
            outcome = GuardCheckOutcome(ok=False, error=str(err) or type(err).__name__)
        if outcome.ok and outcome.decision is not None:
            self._guards_answered()
            return outcome.decision
        return self._guards_failed(phase, outcome)

    async def acheck(self, text: str, phase: Phase, *, project: str | None = None) -> GuardDecision:
        """check() without blocking the event loop (the request runs on a worker thread)."""
        if self.mode == "noop" or (self._started.is_set() and self._start_error is None and not checks_on(self._checks, phase)):
            return ALLOW
        return await asyncio.to_thread(self.check, text, phase, project=project)

    def _guards_answered(self) -> None:
        with self._lock:
            if not self._guard_outage:
                return
            self._guard_outage = False
            unguarded = self._unguarded_in_outage
            self._unguarded_in_outage = 0
        self._logger.warn(
            f"berth governance: the guard checks answer again ({unguarded} check(s) could not run meanwhile)",
            {"code": "BERTH_GOVERNANCE_GUARDS_AVAILABLE", "count": unguarded},
        )

    def _guards_failed(self, phase: Phase, outcome: GuardCheckOutcome) -> GuardDecision:
        with self._lock:
            self._guards_unavailable += 1
            self._unguarded_in_outage += 1
            first = not self._guard_outage
            self._guard_outage = True
        if first:
            then = (
                "calls proceed without guards until it answers again (on_guard_error=allow)"
                if self.on_guard_error == "allow"
                else "calls are refused until it answers again (on_guard_error=block)"
            )
            self._logger.warn(
                f"berth governance: the API could not run the guard checks ({outcome.error}); {then}",
                {"code": "BERTH_GOVERNANCE_GUARDS_UNAVAILABLE", "status": outcome.status, "phase": phase},
            )
        if self.on_guard_error == "block":
            raise GuardUnavailableError(phase, outcome.error, outcome.status)
        return GuardDecision(decision="allow", unavailable=outcome.error)

    # -- traces ------------------------------------------------------------------------------

    def submit(self, trace: Mapping[str, Any], *, project: str | None = None) -> str | None:
        """Queues one trace for delivery and returns its traceId (generated when absent). Never
        raises and never waits: an invalid trace is counted as rejected, with a (rate-limited)
        warning. None when nothing was queued (invalid, shut down, no-op mode). Safe to call from
        any thread and from async code (it only takes a lock and appends)."""
        queue = self._queue
        if queue is None:
            return None
        try:
            problems = trace_problems(trace)
            if problems:
                queue.refuse("; ".join(problems))
                return None
            record = to_record(trace, project if project is not None else self._project)
            return str(record["traceId"]) if queue.enqueue(record) else None
        except Exception as err:  # noqa: BLE001 - submit() never raises into the service
            queue.refuse(str(err) or type(err).__name__)
            return None

    def flush(self, timeout: float = 10.0) -> bool:
        """True once every trace submitted so far is delivered (or settled), False after ``timeout`` seconds."""
        return self._queue.flush(timeout) if self._queue is not None else True

    def shutdown(self, timeout: float | None = None) -> bool:
        """Flushes (up to ``timeout`` seconds, default ``shutdown_timeout``), then stops: later
        submits are dropped. Idempotent."""
        with self._lock:
            if self._shutdown_result is not None:
                return self._shutdown_result
        if self._at_exit_registered:
            atexit.unregister(self._at_exit)
            self._at_exit_registered = False
        self._stop.set()
        result = self._queue.shutdown(self._shutdown_timeout if timeout is None else timeout) if self._queue is not None else True
        close = getattr(self._transport, "close", None)
        if callable(close):
            close()
        with self._lock:
            self._shutdown_result = result
        return result

    def _at_exit(self) -> None:
        try:
            self.shutdown()
        except Exception:  # noqa: BLE001 - never fail the interpreter's exit
            pass

    def stats(self) -> GovernanceStats:
        s = self._queue.stats() if self._queue is not None else QueueStats()
        return GovernanceStats(
            queued=s.queued,
            submitted=s.submitted,
            sent=s.sent,
            duplicates=s.duplicates,
            rejected=s.rejected,
            dropped=s.dropped,
            retries=s.retries,
            last_error=s.last_error,
            mode=self.mode,
            config=self._config_source,
            guards_unavailable=self._guards_unavailable,
        )
