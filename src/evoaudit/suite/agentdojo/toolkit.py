"""What every AgentDojo suite shares as a tool layer: the text a model sees for a tool result, the tools'
function-calling schemas, the ``important_instructions`` attack built without a model, and a fixed clock
for the tools that read the wall clock. All of it runs AgentDojo's own code; nothing here judges.
"""

from __future__ import annotations

import datetime
import functools
import types
from typing import Any

import yaml
from agentdojo.agent_pipeline.tool_execution import tool_result_to_str
from agentdojo.attacks.base_attacks import FixedJailbreakAttack
from agentdojo.attacks.important_instructions_attacks import ImportantInstructionsAttack
from agentdojo.task_suite.task_suite import TaskSuite

_C_SAFE_DUMPER = getattr(yaml, "CSafeDumper", None)


# Plain data's exact types: for these, ``repr`` tells apart any two values YAML would write differently
# (5 and 5.0, "5" and 5, True and 1), so it keys the text already made. Anything else (a date, an enum, a
# str subclass) is formatted afresh each time.
_PLAIN = frozenset({str, int, float, bool, type(None)})
# Tool results repeat across episodes (the same read on the same fixture: 165 results, 12 distinct, over
# the Banking benchmark's 160 episodes); at most this many texts are kept, the oldest dropped first.
_DUMPED_MAX = 1024
_DUMPED: dict[str, str] = {}


def _is_plain(data: Any) -> bool:
    kind = type(data)
    if kind is dict:
        return all(_is_plain(k) and _is_plain(v) for k, v in data.items())
    if kind is list:
        return all(_is_plain(v) for v in data)
    return kind in _PLAIN


def _dump(data: Any) -> str:
    """``_dump_afresh(data)``, from the texts already made when ``data`` is plain data (``_PLAIN``)."""
    if not _is_plain(data):
        return _dump_afresh(data)
    key = repr(data)
    text = _DUMPED.get(key)
    if text is None:
        text = _dump_afresh(data)
        if len(_DUMPED) >= _DUMPED_MAX:
            _DUMPED.pop(next(iter(_DUMPED)), None)
        _DUMPED[key] = text
    return text


def _dump_afresh(data: Any) -> str:
    # libyaml's emitter gives the same text as PyYAML's pure-Python one (AgentDojo's default) several times
    # faster, except that it wraps long double-quoted scalars differently: output with any double quote
    # is therefore made by the pure-Python emitter (tests/suite/agentdojo/test_suite_yaml_speed.py pins the
    # equality). The
    # C representer also refuses str subclasses (Workspace's event status, a StrEnum) that the pure-Python
    # one writes as plain strings: those results go to the pure-Python one too.
    if _C_SAFE_DUMPER is not None:
        try:
            text = yaml.dump(data, Dumper=_C_SAFE_DUMPER)
        except yaml.representer.RepresenterError:
            text = '"'
        if '"' not in text:
            return text
    return yaml.safe_dump(data)


def format_tool_result(result: Any) -> str:
    """The text a model sees for a tool result: AgentDojo's own YAML formatter, byte for byte."""
    return tool_result_to_str(result, dump_fn=_dump)


def tool_schemas(task_suite: TaskSuite) -> tuple[dict[str, Any], ...]:
    """OpenAI function-calling schemas for ``task_suite``'s tools, from AgentDojo's own parameter models."""
    schemas = []
    for fn in task_suite.tools:
        params = fn.parameters.model_json_schema()
        params.pop("title", None)
        for prop in params.get("properties", {}).values():
            prop.pop("title", None)
        schemas.append(
            {
                "type": "function",
                "function": {"name": fn.name, "description": fn.description, "parameters": params},
            }
        )
    return tuple(schemas)


def important_instructions(
    task_suite: TaskSuite, user_name: str, model_name: str
) -> ImportantInstructionsAttack:
    """AgentDojo's ``important_instructions`` attack on ``task_suite`` with names from config.

    Its constructor derives the model name from a table of known model ids and fails for any other, so
    the base class is initialised directly (no pipeline, no model call) and the two names are set from
    config. Its own ``attack(user_task, injection_task)`` then finds the vectors the user task's ground
    truth reaches and fills each with the jailbreak text.
    """
    attack = ImportantInstructionsAttack.__new__(ImportantInstructionsAttack)
    FixedJailbreakAttack.__init__(attack, ImportantInstructionsAttack._JB_STRING, task_suite, None)
    attack.user_name = user_name
    attack.model_name = model_name
    return attack


# AgentDojo's email and cloud-drive tools stamp a sent email or a created or appended file with the wall
# clock (``datetime.datetime.now()``), so an episode's terminal state would depend on when it ran and replay
# could never reproduce it. The audit runs those tools on a fixed clock: Workspace's own calendar day
# (``current_day: 2024-05-15`` in AgentDojo's environment.yaml) at midnight. Banking's tools read no clock.
FIXED_NOW = datetime.datetime(2024, 5, 15, 0, 0)
_CLOCKED_MODULES = (
    "agentdojo.default_suites.v1.tools.email_client",
    "agentdojo.default_suites.v1.tools.cloud_drive_client",
)


class _FixedDatetime(datetime.datetime):
    @classmethod
    def now(cls, tz: Any = None) -> datetime.datetime:  # type: ignore[override]
        return FIXED_NOW if tz is None else FIXED_NOW.replace(tzinfo=tz)


@functools.cache
def fix_clock() -> None:
    """Point the clocked tool modules' ``datetime`` at one whose ``datetime.now()`` is ``FIXED_NOW``;
    everything else of the module is the real one. Idempotent; affects only those two modules."""
    import importlib

    clock = types.ModuleType("datetime")
    clock.__dict__.update(datetime.__dict__)
    clock.datetime = _FixedDatetime  # type: ignore[attr-defined]
    for name in _CLOCKED_MODULES:
        module = importlib.import_module(name)
        module.datetime = clock  # type: ignore[attr-defined]
