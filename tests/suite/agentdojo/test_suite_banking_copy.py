"""Banking's fast environment copy is a deep copy: the same values of the same types, the same set fields,
and no object shared with the original, before an episode and after its tools changed the state."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from evoaudit.suite.agentdojo.banking import tasks as banking
from evoaudit.suite.agentdojo.banking.instances import build_instances


def _typed(x: Any) -> Any:
    """``x`` as a tree that tells types apart (5 and 5.0 differ), with each model's set fields."""
    if isinstance(x, BaseModel):
        fields = {k: _typed(v) for k, v in x.__dict__.items()}
        return (type(x), sorted(x.model_fields_set), fields, x.__pydantic_extra__, x.__pydantic_private__)
    if isinstance(x, dict):
        return ("dict", [(_typed(k), _typed(v)) for k, v in x.items()])
    if isinstance(x, list | tuple):
        return (type(x), [_typed(v) for v in x])
    return (type(x), x)


def _objects(x: Any) -> list[int]:
    """The ids of every model and container in ``x``."""
    if isinstance(x, BaseModel):
        return [id(x), id(x.__dict__), *(i for v in x.__dict__.values() for i in _objects(v))]
    if isinstance(x, dict):
        return [id(x), *(i for v in x.values() for i in _objects(v))]
    if isinstance(x, list):
        return [id(x), *(i for v in x for i in _objects(v))]
    return []


def _assert_exact_copy(env: Any) -> None:
    fast, deep = banking.copy_environment(env), env.model_copy(deep=True)
    assert _typed(fast) == _typed(deep) == _typed(env)
    assert not set(_objects(fast)) & set(_objects(env))


# Calls whose arguments a model may give with other types than the tools annotate (ints for amounts).
_LOOSE_CALLS = [
    (
        "send_money",
        {"recipient": "GB29NWBK60161331926819", "amount": 5, "subject": "x", "date": "2022-04-01"},
    ),
    ("update_scheduled_transaction", {"id": 7, "amount": 12, "recurring": False}),
    (
        "schedule_transaction",
        {"recipient": "X1", "amount": 3, "subject": "y", "date": "2022-05-01", "recurring": True},
    ),
    ("update_user_info", {"street": "1 New Road", "city": "Bern"}),
    ("update_password", {"password": "hunter2"}),
]


def test_the_banking_copy_equals_a_deep_copy_before_and_after_an_episode(cfg):
    attack = banking.make_attack(cfg.suite.attack.user_name, cfg.suite.attack.model_name)
    runtime = banking.make_runtime()
    checked = 0
    for inst in (i for i in build_instances(cfg) if i.variant in ("v0", "v3")):
        goal = banking.injection_task_ids()[checked % 9]
        injections = {v: banking.injection_text(attack, goal, inst.prompt) for v in inst.vectors}
        env = banking.build_environment(inst.environment_template, injections)
        _assert_exact_copy(env)
        pre = banking.copy_environment(env)
        calls = [(c.function, dict(c.args)) for c in inst.ground_truth]
        calls += [(c.function, dict(c.args)) for c in banking.injection_task(goal).ground_truth(pre)]
        for name, args in calls + _LOOSE_CALLS:
            runtime.run_function(env, name, args)
        _assert_exact_copy(env)
        checked += 1
    assert checked == 30
