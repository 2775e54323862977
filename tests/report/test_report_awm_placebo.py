"""The AWM placebo on hand-built rollouts: episodes run under awm-literal, awm-adapted and placebo-awm by a
model that copies its deployed workflow into its answer, then tabulated. The prose placebo emits no textual
actions where the AWM arms do, and the placebo table carries the placebo's recorded length ratio."""

from __future__ import annotations

import asyncio

import pytest

from evoaudit import config as config_mod
from evoaudit.agent.prompt import system_prompt
from evoaudit.evaluate.runner import plan_episodes, run_one
from evoaudit.methods import awm
from evoaudit.methods.artifact import ArtifactMeta, read_meta, write_artifact
from evoaudit.methods.conditions import Insertion, condition
from evoaudit.methods.placebo import make_placebo
from evoaudit.models.base import ChatResponse
from evoaudit.records import Message, Rollout
from evoaudit.report import tables
from evoaudit.suite.agentdojo.banking.instances import build_instances

# An AWM workflow in its <think>/<action> envelope (the shape awm.steps reads), one per lineage.
WORKFLOW = """## Settle a bill found in a file
For requests such as: pay what {file} asks for ...
<think>Open the file first.</think>
<action>read_file(file_path={file})</action>
<think>Pay with the values it gives{extra}.</think>
<action>send_money(recipient={iban}, amount={amount}, subject={subject}, date="2022-04-01")</action>
"""
CONDITIONS = ("awm-literal", "awm-adapted", "placebo-awm")


class _Echo:
    """Answers, with no native call, by copying the deployed sections of its system prompt."""

    async def complete(self, request):
        system = request.messages[0].content or ""
        copied = system[system.find("\n## ") :] if "\n## " in system else ""
        return ChatResponse(message=Message(role="assistant", content=copied), finish_reason="stop")

    def fingerprint(self):
        return {"backend": "echo", "model": "echo"}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("awm")
    cfg = config_mod.from_dict(
        {
            "lineages": ["L1", "L2"],
            "methods": ["static", "awm"],
            "conditions": ["static", *CONDITIONS],
            "report": {"bootstrap": {"replicates": 100}, "figures": False},
        }
    )
    instances = [i for i in build_instances(cfg) if i.instance_id in ("user_task_1.v3", "user_task_2.v3")]
    rollouts, metas, ratios = [], {}, {}
    for lineage, extra in (("L1", ""), ("L2", " and keep the receipt")):
        real = root / lineage / "awm"
        state = {awm.STATE_FILE: WORKFLOW.replace("{extra}", extra)}
        write_artifact(real, ArtifactMeta(method="awm", lineage=lineage, state_files=[awm.STATE_FILE]), state)
        ratios[lineage] = make_placebo(0, lineage, "awm", real, root / lineage / "placebo-awm")[
            "length_ratio"
        ]
        metas[(lineage, "placebo-awm")] = read_meta(root / lineage / "placebo-awm").model_dump()
        for cond in CONDITIONS:
            directory = root / lineage / ("placebo-awm" if cond == "placebo-awm" else "awm")
            system = system_prompt(cfg.agent.system_prompt, Insertion(condition(cond), directory).sections())
            for spec in plan_episodes(lineage, cond, "benign", instances, []):
                r = asyncio.run(run_one(cfg, _Echo(), spec, system, None))
                rollouts.append(Rollout.model_validate_json(r.model_dump_json()))
    return tables.Data.build(cfg, rollouts), metas, ratios, rollouts


def test_the_prose_placebo_emits_no_textual_actions_where_the_awm_arms_do(setup):
    data, _, _, rollouts = setup
    assert len(rollouts) == 2 * 3 * 2 and all(r.outcome.infra_failure is None for r in rollouts)
    # The answers copied the deployed workflow (so a textual action could only come from what was deployed).
    assert all(r.final_output.startswith("\n## ") for r in rollouts)
    iface = tables.interface_table(data).set_index(["condition", "arm"])
    assert iface.loc[("placebo-awm", "benign"), "textual_action_rate"] == 0.0
    assert iface.loc[("awm-literal", "benign"), "textual_action_rate"] == 1.0  # the envelope itself
    assert iface.loc[("awm-adapted", "benign"), "textual_action_rate"] == 1.0  # the bare calls left in it
    assert all(iface.loc[(c, "benign"), "n"] == 4 for c in CONDITIONS)


def test_the_placebo_rows_carry_the_placebos_recorded_length_ratio(setup):
    data, metas, ratios, _ = setup
    placebo = tables.placebo_table(data, tables.find_length_ratios(metas)).set_index("condition")
    assert list(placebo.index) == ["awm-literal", "awm-adapted"]
    for cond in ("awm-literal", "awm-adapted"):
        row = placebo.loc[cond]
        assert row.placebo == "placebo-awm" and row.n_benign == 4
        assert row.length_ratio_mean == pytest.approx((ratios["L1"] + ratios["L2"]) / 2)
        assert row.length_ratio_by_lineage == f"L1:{ratios['L1']:.3f};L2:{ratios['L2']:.3f}"
    assert all(0.85 <= v <= 1.15 for v in ratios.values()), ratios
