"""Guard decisions as the API's guard check returns them, and what the boot config says about the
guard chain: which checks run on which phase, and with which action.

The Python toolkit does not carry the guard engine: it asks the API (POST
/api/v1/governance/guard-check), which runs the same engine the TypeScript toolkit runs in process.
What it knows locally is the shape of the chain, read from the config fetched at boot, exactly as
the engine builds it: prompt_injection (built in, input only), sensitive_data (built in, guard type
pii_detection, both phases), then each enabled entry of guards.custom_templates whose template is
resolved, on the template's phases (default by guard type). That is enough to skip the round trip
when no check runs on a phase, and to choose how a stream is guarded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast

Phase = Literal["input", "output"]
Decision = Literal["allow", "block", "redact"]
GuardType = Literal["pii_detection", "prompt_injection", "toxicity", "off_topic", "custom"]
StreamStrategy = Literal["passthrough", "window", "buffer"]

PHASES: tuple[Phase, ...] = ("input", "output")
GUARD_TYPES: tuple[str, ...] = ("pii_detection", "prompt_injection", "toxicity", "off_topic", "custom")

#: Where each guard type runs unless a template says otherwise.
DEFAULT_PHASES: Mapping[str, tuple[Phase, ...]] = {
    "pii_detection": ("input", "output"),
    "prompt_injection": ("input",),
    "toxicity": ("input", "output"),
    "off_topic": ("input",),
    "custom": ("input", "output"),
}

#: Whole-text judgements: their verdict on a part of a stream says little about the whole.
WHOLE_TEXT = frozenset({"off_topic", "prompt_injection"})


@dataclass(frozen=True)
class GuardEvaluation:
    """One entry of a decision's evaluations (a trace's guardEvaluations)."""

    guard_type: str
    result: str
    confidence: float
    #: "prompt_injection", "sensitive_data" or "template:<template_id>"
    source: str

    def to_dict(self) -> dict[str, Any]:
        return {"guardType": self.guard_type, "result": self.result, "confidence": self.confidence, "source": self.source}


@dataclass(frozen=True)
class GuardBlock:
    """A guard block record: what matched (described without the matched text) and what was done."""

    guard_type: str
    blocked_content: str
    confidence: float
    #: "block" or "redact"
    action: str
    source: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "guardType": self.guard_type,
            "blockedContent": self.blocked_content,
            "confidence": self.confidence,
            "action": self.action,
            "source": self.source,
        }


def _unit(v: Any) -> bool:
    """Whether v is a number from 0 to 1 (not a bool)."""
    return not isinstance(v, bool) and isinstance(v, (int, float)) and 0 <= v <= 1


@dataclass(frozen=True)
class GuardDecision:
    """The app's guards on one text of one phase: block if any guard blocked, else redact if any
    redacted, else allow."""

    decision: Decision
    evaluations: tuple[GuardEvaluation, ...] = ()
    blocks: tuple[GuardBlock, ...] = ()
    #: the text with redacted spans replaced, present when any guard redacted
    redacted_text: str | None = None
    #: why the guards could not run (the decision is then "allow" by on_guard_error="allow"); None when they ran
    unavailable: str | None = field(default=None, compare=False)
    #: the prompt-injection classifier's score of an input, when the API's model ran (sent with the trace)
    classifier_score: float | None = None
    #: the classifier's toxicity score of an input, when a toxicity template with classifier had a say (sent with the trace)
    toxicity_score: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The wire form: {decision, redactedText?, evaluations, blocks}."""
        out: dict[str, Any] = {"decision": self.decision}
        if self.redacted_text is not None:
            out["redactedText"] = self.redacted_text
        out["evaluations"] = [e.to_dict() for e in self.evaluations]
        out["blocks"] = [b.to_dict() for b in self.blocks]
        if self.classifier_score is not None:
            out["classifierScore"] = self.classifier_score
        scores = self.classifier_scores()
        if scores:
            out["classifierScores"] = scores
        return out

    def classifier_scores(self) -> dict[str, float]:
        """The classifier's scores that had a say, as a trace's classifierScores carries them."""
        out: dict[str, float] = {}
        if self.classifier_score is not None:
            out["promptInjection"] = self.classifier_score
        if self.toxicity_score is not None:
            out["toxicity"] = self.toxicity_score
        return out

    @staticmethod
    def from_dict(body: Mapping[str, Any]) -> GuardDecision:
        """Reads the guard check's answer; ValueError when it is not a decision."""
        decision = body.get("decision")
        if decision not in ("allow", "block", "redact"):
            raise ValueError("decision must be allow, block or redact")
        redacted = body.get("redactedText")
        if redacted is not None and not isinstance(redacted, str):
            raise ValueError("redactedText must be a string")
        evaluations = body.get("evaluations", [])
        blocks = body.get("blocks", [])
        if not isinstance(evaluations, list) or not isinstance(blocks, list):
            raise ValueError("evaluations and blocks must be lists")
        score = body.get("classifierScore")
        if score is not None and not _unit(score):
            raise ValueError("classifierScore must be a number from 0 to 1")
        scores = body.get("classifierScores")
        if scores is not None and not isinstance(scores, Mapping):
            raise ValueError("classifierScores must be an object")
        toxicity = scores.get("toxicity") if scores is not None else None
        if toxicity is not None and not _unit(toxicity):
            raise ValueError("classifierScores.toxicity must be a number from 0 to 1")
        try:
            return GuardDecision(
                decision=cast(Decision, decision),
                redacted_text=redacted,
                classifier_score=None if score is None else float(score),
                toxicity_score=None if toxicity is None else float(toxicity),
                evaluations=tuple(
                    GuardEvaluation(
                        guard_type=str(e["guardType"]),
                        result=str(e["result"]),
                        confidence=_number(e["confidence"]),
                        source=str(e["source"]),
                    )
                    for e in evaluations
                ),
                blocks=tuple(
                    GuardBlock(
                        guard_type=str(b["guardType"]),
                        blocked_content=str(b["blockedContent"]),
                        confidence=_number(b["confidence"]),
                        action=str(b["action"]),
                        source=str(b["source"]),
                    )
                    for b in blocks
                ),
            )
        except (KeyError, TypeError) as err:
            raise ValueError(f"not a guard decision: {err}") from err


def _number(v: object) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError("confidence must be a number")
    return v


#: The decision when no guard runs (no check on the phase, or governance off).
ALLOW = GuardDecision(decision="allow")


@dataclass(frozen=True)
class GuardCheck:
    """One check of the app's chain, as far as the toolkit needs to know it."""

    source: str
    guard_type: str
    phases: frozenset[Phase]
    #: "block", "redact" or "flag" (flag records, never enforces)
    action: str


def _enabled(v: object) -> bool:
    return not (isinstance(v, Mapping) and v.get("enabled", True) is False)


def guard_checks(engine: Mapping[str, Any] | None) -> tuple[GuardCheck, ...]:
    """The chain of an EngineConfig (the ``engine`` of GET /governance/config, templates resolved),
    in order. ``None`` or ``{}`` is the default config: both built-in guards on."""
    engine = engine or {}
    guards = engine.get("guards") or {}
    templates = engine.get("templates") or {}
    checks: list[GuardCheck] = []
    if _enabled(guards.get("prompt_injection")):
        checks.append(GuardCheck("prompt_injection", "prompt_injection", frozenset(DEFAULT_PHASES["prompt_injection"]), "block"))
    if _enabled(guards.get("sensitive_data")):
        checks.append(GuardCheck("sensitive_data", "pii_detection", frozenset(DEFAULT_PHASES["pii_detection"]), "block"))
    for ref in guards.get("custom_templates") or []:
        if not isinstance(ref, Mapping) or ref.get("enabled", True) is False:
            continue
        template_id = ref.get("template_id")
        template = templates.get(template_id) if isinstance(template_id, str) else None
        if not isinstance(template, Mapping):
            continue
        guard_type = str(template.get("guardType"))
        config = template.get("config") or {}
        phases: Sequence[str] = config.get("phases") or DEFAULT_PHASES.get(guard_type, PHASES)
        checks.append(
            GuardCheck(
                source=f"template:{template_id}",
                guard_type=guard_type,
                phases=frozenset(p for p in phases if p in PHASES),
                action=str(config.get("action", "block")),
            )
        )
    return tuple(checks)


def checks_on(checks: Sequence[GuardCheck], phase: Phase) -> bool:
    """Whether any check runs on ``phase`` (the guard check is skipped when none does)."""
    return any(phase in c.phases for c in checks)


def enforces_on(checks: Sequence[GuardCheck], phase: Phase) -> bool:
    """Whether any check on ``phase`` can block or redact (flag-only checks never change a call)."""
    return any(phase in c.phases and c.action != "flag" for c in checks)


def stream_strategy(checks: Sequence[GuardCheck], mode: Literal["auto", "buffer"] = "auto") -> StreamStrategy:
    """What the output checks allow on a stream: passthrough (none enforces), buffer (a whole-text
    judgement enforces, or mode "buffer"), else window."""
    enforcing = [c for c in checks if "output" in c.phases and c.action != "flag"]
    if not enforcing:
        return "passthrough"
    if mode == "buffer" or any(c.guard_type in WHOLE_TEXT for c in enforcing):
        return "buffer"
    return "window"
