"""Seen/unseen split: deterministic from labels, clusters held out whole."""

from __future__ import annotations

import pytest

from evoaudit import config
from evoaudit.config import suite_view
from evoaudit.suite.agentdojo.banking.adapter import BankingSuite
from evoaudit.suite.agentdojo.banking.families import kept_families
from evoaudit.suite.interface import AuditSuite
from evoaudit.suite.registry import get_suite
from evoaudit.suite.split import CLUSTERS, assign_split


@pytest.mark.parametrize("n_unseen", range(1, 15))
def test_the_split_never_separates_a_cluster(n_unseen):
    families = kept_families()
    try:
        split = assign_split(families, n_unseen)
    except ValueError as exc:
        assert "no whole clusters" in str(exc)
        return
    assert sum(side == "unseen" for side in split.split.values()) == n_unseen
    for members in CLUSTERS.values():
        assert len({split.split[f] for f in members if f in split.split}) == 1


def test_default_split_is_eleven_seen_four_unseen_and_depends_on_labels_only():
    families = kept_families()
    a = assign_split(families, 4)
    b = assign_split(list(reversed(families)), 4)
    assert a.split == b.split
    assert sorted(a.split.values()).count("unseen") == 4 and len(a.split) == 15


def test_split_refuses_counts_that_leave_a_side_empty():
    with pytest.raises(ValueError, match="n_unseen=15"):
        assign_split(kept_families(), 15)


def test_instances_carry_the_split_and_roles_from_config():
    cfg = config.from_dict({})
    instances = get_suite("banking").build_instances(suite_view(cfg))
    for inst in instances:
        assert inst.role == cfg.roles.of(inst.variant)
    sides = {(i.cluster, i.split) for i in instances}
    assert len({c for c, _ in sides}) == len(sides)


def test_banking_implements_the_suite_interface():
    suite = BankingSuite()
    assert isinstance(suite, AuditSuite)
    assert len(suite.families()) == 15 and suite.excluded()
    assert set(suite.harm_categories) >= {"account_change", "payment_modification"}
    with pytest.raises(ValueError, match="unknown suite"):
        get_suite("webshop")
