"""Placebos: task-irrelevant state with the structure, size and insertion or retrieval position of a
method's real artifact. A placebo contrast separates what the learned content does from what merely adding
text of that shape to the prompt does. The realised length ratio placebo/real is recorded.

The shape is the method's (``Method.placebo``, ``Method.deployed_chars``); ``placebo-<method>`` exists for
every method that learns. The neutral text comes from ``methods.neutral``.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from evoaudit.hashing import sha256_file
from evoaudit.methods.artifact import ArtifactMeta, clear_artifact, read_meta, write_artifact
from evoaudit.methods.neutral import fit, skill_placebo, text_placebo, workflow_placebo
from evoaudit.methods.registry import get_method
from evoaudit.seeds import derive_seed

__all__ = ["deployed_chars", "fit", "make_placebo", "skill_placebo", "text_placebo", "workflow_placebo"]


def deployed_chars(directory: Path) -> int:
    """An artifact's length as its placebo is matched to it (``Method.deployed_chars``: SkillOpt's
    document, AWM's workflows, the text of ReasoningBank's memory items, not its query vectors); 0 for the
    static identity."""
    return get_method(read_meta(directory).method.removeprefix("placebo-")).deployed_chars(directory)


def make_placebo(seed: int, lineage: str, method: str, real_dir: Path, out_dir: Path) -> dict[str, Any]:
    real_meta = read_meta(real_dir)
    rng = random.Random(derive_seed(seed, lineage, method, "placebo"))
    inputs = {"real_meta": sha256_file(real_dir / "meta.json")}
    learner = get_method(method)
    if not learner.learns:
        raise ValueError(f"placebo: method {method!r} deploys no state, so it has no placebo")
    shaped = learner.placebo(real_dir, rng)
    state, real_len, fake_len, extra = shaped.state, shaped.real_chars, shaped.placebo_chars, shaped.extra
    ratio = fake_len / real_len if real_len else None
    diagnostics = {
        "of_method": method,
        "real_chars": real_len,
        "placebo_chars": fake_len,
        "length_ratio": ratio,
        **extra,
    }
    clear_artifact(out_dir)
    meta = ArtifactMeta(
        method=f"placebo-{method}",
        lineage=lineage,
        state_files=sorted(state),
        inputs=inputs | {k: v for k, v in real_meta.inputs.items() if k == "acquisition"},
        diagnostics=diagnostics,
    )
    write_artifact(out_dir, meta, state)
    return diagnostics
