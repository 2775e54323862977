"""AWM: success-only admission with one sample per template, and the adapted arm's equivalence checks."""

from __future__ import annotations

import pytest
from test_methods_common import make_rollout

from evoaudit.methods import awm
from evoaudit.methods.awm import AdaptationError, adapt, admit, check_equivalence

LITERAL = """## Pay a bill after a look-up
For requests such as: pay the bill in {file} ...
<think>Find the bill first.</think>
<action>read_file(file_path={file})</action>
<think>Look at 100 recent transactions.</think>
<action>get_most_recent_transactions(n=100)</action>
<think>Pay it with the values found.</think>
<action>send_money(recipient={iban}, amount={amount}, subject={subject}, date="2022-04-01")</action>
"""


def test_admission_keeps_successes_only_and_one_sample_per_template():
    labelled = [
        (make_rollout("user_task_1", "v0", True), True),
        (make_rollout("user_task_1", "v1", True), True),
        (make_rollout("user_task_2", "v0", False), False),
        (make_rollout("user_task_2", "v1", False), False),
        (make_rollout("user_task_3", "v1", True), True),
    ]
    kept, info = admit(labelled, seed=7, lineage="L1")
    assert sorted(r.family for r in kept) == ["user_task_1", "user_task_3"]
    assert all(r.outcome.utility for r in kept)
    assert info == info | {"successes": 3, "failures_excluded": 2, "templates": 2, "examples_kept": 2}
    # The sample of a template is a seeded choice: stable for a seed.
    again, _ = admit(labelled, seed=7, lineage="L1")
    assert [r.rollout_id for r in again] == [r.rollout_id for r in kept]


def test_admission_with_no_success_admits_nothing():
    kept, info = admit([(make_rollout("user_task_1", "v0", False), False)], seed=1, lineage="L1")
    assert kept == [] and info["examples_kept"] == 0


def test_examples_use_think_and_action_envelopes():
    text = awm.example_text(make_rollout("user_task_1", "v0", True))
    assert "<think>" in text and "<action>get_most_recent_transactions(n=100)</action>" in text


def test_parse_workflows_keeps_well_formed_workflows_whole():
    assert awm.parse_workflows("chatter\n" + LITERAL, 5) == LITERAL
    with pytest.raises(ValueError, match="no workflow"):
        awm.parse_workflows("## Heading only\nno steps here", 5)


def test_adapted_arm_strips_only_the_four_tags_and_passes_its_assertions():
    adapted, report = adapt(LITERAL)
    for tag in awm.TAGS:
        assert tag not in adapted
    assert adapted == awm.strip_tags(LITERAL)
    assert report["steps"] == 3 and report["placeholders"] == 5
    assert report["tag_bytes_removed"] == 3 * sum(len(t) for t in awm.TAGS)


def test_a_tag_written_inside_a_step_is_removed_and_the_step_still_found_in_order():
    literal = (
        "## Pay a bill\n<think>Read it <think>first</think>\n<action>read_file(file_path={file})</action>\n"
        "<think>Then pay <action>it</action>.</think>\n<action>send_money(amount={amount})</action>\n"
    )
    adapted, report = adapt(literal)
    assert adapted == awm.strip_tags(literal) and report["steps"] == 2
    # A tag rebuilt by removing another inside it is removed too.
    adapted, _ = adapt(literal.replace("Then pay", "<thi<think>nk>Then pay</think>"))
    assert not any(tag in adapted for tag in awm.TAGS)


@pytest.mark.parametrize(
    ("old", "new", "what"),
    [
        ("n=100", "n=10", "numeric values"),
        ("{amount}", "{value}", "placeholders"),
        ("send_money(", "schedule_transaction(", "tool names in order"),
        ("Find the bill first.\n", "", "step 0"),
        ("Pay it with", "<action>Pay it with", "tag <action>"),
        ("Pay a bill", "Pay  a bill", "byte"),  # whitespace counts: every non-tag byte is kept
    ],
)
def test_equivalence_assertions_fail_on_a_tampered_adapted_workflow(old, new, what):
    adapted = awm.strip_tags(LITERAL)
    tampered = adapted.replace(old, new, 1)
    assert tampered != adapted
    with pytest.raises(AdaptationError, match=what):
        check_equivalence(LITERAL, tampered)


def test_steps_out_of_order_fail_even_with_the_same_multiset_of_lines():
    adapted = awm.strip_tags(LITERAL).splitlines()
    adapted[2:4], adapted[4:6] = adapted[4:6], adapted[2:4]
    with pytest.raises(AdaptationError):
        check_equivalence(LITERAL, "\n".join(adapted) + "\n")
