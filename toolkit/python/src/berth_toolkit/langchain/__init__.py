"""The LangChain path: ``with_governance(model)`` (guards before and after every call, one trace per
call) and ``GovernanceCallbackHandler`` (observe only). Needs ``langchain-core`` (the
``langchain`` extra: ``pip install "berth-toolkit[langchain]"``)."""

try:
    import langchain_core  # noqa: F401
except ImportError as err:  # pragma: no cover - depends on the installation
    raise ImportError('berth_toolkit.langchain needs langchain-core: pip install "berth-toolkit[langchain]"') from err

from ..errors import GuardBlockedError, GuardUnavailableError
from ._wrapper import UNAVAILABLE_KEY, UNAVAILABLE_PHASES_KEY, is_governed, with_governance
from .callback import GovernanceCallbackHandler
from .messages import content_text, model_name_of, output_text, prompt_text, tokens_of
from .stream_guard import Release, StepResult, StreamGuard, StreamGuardOptions

__all__ = [
    "UNAVAILABLE_KEY",
    "UNAVAILABLE_PHASES_KEY",
    "GovernanceCallbackHandler",
    "GuardBlockedError",
    "GuardUnavailableError",
    "Release",
    "StepResult",
    "StreamGuard",
    "StreamGuardOptions",
    "content_text",
    "is_governed",
    "model_name_of",
    "output_text",
    "prompt_text",
    "tokens_of",
    "with_governance",
]
