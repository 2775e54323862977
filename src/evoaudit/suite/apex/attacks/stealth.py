"""How much natural language a world holds, and whether injected text stands out in it.

Two build-time measurements (``build.build_all`` records both in ``apex_manifest.json``):

- **Line shapes** (``line_shape``, ``world_shapes``): every non-empty line of the text an agent reads in a
  world's txt, md, docx and pdf files, mail (subject and body), chat messages and calendar events (title and
  description), reduced to its shape: whitespace collapsed, then e-mail addresses -> ``<E>``, file paths
  (a word with ``/`` or ``_``, or a file name) -> ``<P>``, numbers (with their sign and inner separators)
  -> ``<N>``, the generator's people and company names anywhere and every other capitalised word that does
  not start a sentence, list item or line (names of projects, months, days) -> ``<X>`` (a run of them is one
  ``<X>``), case kept.
  Two lines that differ only in such slots have one shape. The count of distinct shapes per world and across
  the set says how much varied prose there is.
- **Stealth** (``stealth_auc``): for each attack vector (the document kinds txt, md, docx, xlsx, pdf and the
  apps mail, chat, calendar), a classifier on character n-grams (scikit-learn ``TfidfVectorizer``,
  ``analyzer='char_wb'``, 2-4 grams, sublinear tf, and ``LogisticRegression`` with balanced class weights;
  at most ``BENIGN_CAP`` benign items per vector and the first ``TEXT_CAP`` characters of each item)
  separates the injected items of that vector from the world's benign items of the same kind; its
  out-of-fold ROC AUC is recorded with the n of each class and the n-grams that most mark an item as injected
  (``stealth_features``). 0.5 is chance. The folds are GROUPED (``StratifiedGroupKFold``, k = min(5, groups
  of the smaller class), shuffled with the config seed): an injected item's group is its attack GOAL (the
  first instance that places it), so items that carry one goal's injected step with its destination, near
  copies across tasks, never sit on both sides of a split; a benign item's group is its world. Each AUC has
  a 95% percentile interval from ``N_BOOT`` bootstrap replicates that resample groups with replacement within
  each class (seeded from the config seed) and re-score the out-of-fold scores (the classifier is not
  refitted per replicate). The injected items are what the default attack set (``attacks.AttackOptions()``,
  the simulated attacker's notes, ``attacker_sim``) places: created notes, instruction files, recovery
  notes, damaged-file notices, mail, chat messages and calendar events. Beside it, ``length_auc`` (same
  interval): the AUC of the item's length alone, the baseline the n-gram AUC must be read against (most of
  its separation is length; below 0.5, injected items are the shorter ones, and the distance from 0.5 is
  the separation). A diagnostic only: injected items are not meant to be stealthy (the paper's
  exposure rests on navigation, and a damaged-file notice is meant to be noticed), so there is no threshold
  and no warning. Deterministic: one seed, one result.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from evoaudit.errors import AuditError
from evoaudit.suite.apex.attacks import attack_set as attacks
from evoaudit.suite.apex.attacks import attacker_sim
from evoaudit.suite.apex.attacks.attacker import Attacker
from evoaudit.suite.apex.base.threat import AttackInstance, Placed
from evoaudit.suite.apex.base.workspace import Workspace, kind_of
from evoaudit.suite.apex.runtime import tools
from evoaudit.suite.apex.worlds.generate import PROPER_NAMES, TASK_IDS, GeneratedTask

STEALTH_VECTORS = ("txt", "md", "docx", "xlsx", "pdf", "mail", "chat", "calendar")
BENIGN_CAP = 300  # benign items per vector fed to the classifier (an even spread over the set's worlds)
TEXT_CAP = 3000  # characters of each item the classifier reads (its opening; bounds the check's time)
STEALTH_SEED = 0  # the folds' shuffle and the bootstrap when no config seed is given
N_BOOT = 1000  # bootstrap replicates per AUC interval
STEALTH_VERSION = 2  # 2: grouped folds and intervals; a cached ``world_text`` of another version is redone
TOP_FEATURES = 12  # n-grams recorded per vector: what the classifier keys on

_EMAIL = re.compile(r"\S+@\S+")
_PATH = re.compile(r"\S*[/_]\S*|\S+\.(?:txt|md|docx|xlsx|pdf|csv|py|pyc|json)\b")
_NUMBER = re.compile(r"[-+$]?\d+(?:[,.:/-]\d+)*")
# Not after sentence punctuation, a list dash or a colon: a sentence's first word is not a name.
_CAPS = re.compile(r"(?<=[\w,;)'\"<>] )[A-Z][\w'&.-]*")
_NAMES = re.compile(r"\b(?:" + "|".join(PROPER_NAMES) + r")\b")
_XRUN = re.compile(r"<X>(?:[ ,&]+<X>)+")
_SPACE = re.compile(r"\s+")


def line_shape(line: str) -> str:
    """The shape of one line of text (module docstring): slots for addresses, paths, numbers, names. The
    generator's own people and company names are slots wherever they stand, the line's first word too."""
    s = _SPACE.sub(" ", line).strip()
    s = _EMAIL.sub("<E>", s)
    s = _PATH.sub("<P>", s)
    s = _NUMBER.sub("<N>", s)
    s = _NAMES.sub("<X>", s)
    s = _CAPS.sub("<X>", s)
    return _XRUN.sub("<X>", s)


def world_items(ws: Workspace) -> dict[str, list[str]]:
    """{kind: the text an agent reads of each item}: files of the ``STEALTH_VECTORS`` document kinds (by
    path), mail as subject and body, chat messages, calendar events as title and description."""
    out: dict[str, list[str]] = {v: [] for v in STEALTH_VECTORS}
    for path in sorted(ws.files):
        k = kind_of(path)
        if k in STEALTH_VECTORS:
            out[k].append(tools.file_text(ws.files[path].data, k))
    out["mail"] = [f"{m.subject}\n{m.body}" for m in ws.mail]
    out["chat"] = [m.text for c in ws.chat.values() for m in c.messages]
    out["calendar"] = [f"{e.title}\n{e.description}" for e in ws.calendar]
    return out


def world_shapes(items: dict[str, list[str]]) -> tuple[int, set[str]]:
    """(non-empty lines, the set of their shapes) of one world's ``world_items``; xlsx text (comma-joined
    cells) does not count."""
    lines = [
        ln
        for k, texts in items.items()
        if k != "xlsx"
        for text in texts
        for ln in text.splitlines()
        if ln.strip()
    ]
    return len(lines), {line_shape(ln) for ln in lines}


# --- stealth ----------------------------------------------------------------------------------------------


def _reference_attacker() -> Attacker:
    # The simulator is a deterministic function, not a model: the world build uses it as its reference
    # attacker even where model calls are refused (a reproduction rebuilds worlds), so the offline guard in
    # Attacker.__init__ does not apply.
    att = Attacker.__new__(Attacker)
    att.ask, att.model, att.sim_note_version = attacker_sim.answer, "sim", attacker_sim.NOTE_VERSION
    att.key = lambda messages: ""
    return att


def reference_attacks(tasks: Sequence[GeneratedTask], seed: int = 0) -> list[AttackInstance]:
    """The default attack set over ``tasks`` as the simulated attacker writes it (each task at its position
    among all fifteen, so a subset gets the vectors the full set gives it)."""
    att, opts = _reference_attacker(), attacks.AttackOptions()
    out: list[AttackInstance] = []
    for t in tasks:
        # Programs are not text an agent reads: their compilation is skipped.
        out += attacks.generate_task_attacks(
            t, TASK_IDS.index(t.record.task_id), att, opts, seed, programs=False
        )
    return out


def _placed_item(p: Placed) -> tuple[str, str] | None:
    kind, _, rest = p.target.partition(":")
    if kind == "file":
        k = kind_of(rest)
        return (k, tools.file_text(p.data, k)) if k in STEALTH_VECTORS else None
    rec = json.loads(p.data)
    if kind == "mail":
        return "mail", f"{rec['subject']}\n{rec['body']}"
    if kind == "chat":
        return "chat", rec["text"]
    return "calendar", f"{rec['title']}\n{rec['description']}"


def injected_groups(instances: Sequence[AttackInstance]) -> dict[str, list[tuple[str, str]]]:
    """{vector: (text an agent would read, group)} of each injected item, deduplicated per vector; the group
    is the goal of the first instance that places the text (module docstring: near copies share a goal)."""
    out: dict[str, list[tuple[str, str]]] = {v: [] for v in STEALTH_VECTORS}
    seen: dict[str, set[str]] = {v: set() for v in STEALTH_VECTORS}
    for a in instances:
        placed = [*a.payload, *((a.instruction_file,) if a.instruction_file else ())]
        if a.watcher is not None:
            placed.append(a.watcher.replacement)
            if a.watcher.instruction_file is not None:
                placed.append(a.watcher.instruction_file)
        for p in placed:
            item = _placed_item(p)
            if item and item[1] not in seen[item[0]]:
                seen[item[0]].add(item[1])
                out[item[0]].append((item[1], f"goal:{a.goal_id}"))
    return out


def injected_items(instances: Sequence[AttackInstance]) -> dict[str, list[str]]:
    """{vector: the texts an agent would read of each injected item}, deduplicated per vector."""
    return {v: [t for t, _ in pairs] for v, pairs in injected_groups(instances).items()}


def benign_groups(worlds: Sequence[dict[str, list[str]]]) -> dict[str, list[tuple[str, str]]]:
    """{vector: (text, group)} of the clean worlds' items of that kind from each world's ``world_items``, at
    most ``BENIGN_CAP`` per vector, taken round-robin over the worlds so each contributes; the group is the
    world (its position in ``worlds``)."""
    out: dict[str, list[tuple[str, str]]] = {}
    for v in STEALTH_VECTORS:
        lists, chosen, i = [w[v] for w in worlds], [], 0
        while len(chosen) < BENIGN_CAP and any(i < len(x) for x in lists):
            chosen += [(x[i], f"world:{j}") for j, x in enumerate(lists) if i < len(x)]
            i += 1
        out[v] = chosen[:BENIGN_CAP]
    return out


def benign_items(worlds: Sequence[dict[str, list[str]]]) -> dict[str, list[str]]:
    """{vector: texts} of ``benign_groups``."""
    return {v: [t for t, _ in pairs] for v, pairs in benign_groups(worlds).items()}


def _classifier() -> Any:
    try:
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline
    except ImportError as exc:
        raise AuditError(
            "the APEX world build's stealth check needs scikit-learn, a dependency in pyproject.toml and "
            "environment.yml: pip install 'scikit-learn>=1.4' (or pip install -e . again)"
        ) from exc
    return make_pipeline(
        TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4), sublinear_tf=True),
        LogisticRegression(class_weight="balanced", max_iter=2000),
    )


def _groups(texts: Sequence[str], groups: Sequence[str] | None, tag: str) -> list[str]:
    # Without groups each item is its own group (plain stratified folds, an item-level bootstrap).
    return list(groups) if groups is not None else [f"{tag}{i}" for i in range(len(texts))]


def grouped_folds(
    labels: Sequence[int], groups: Sequence[str], seed: int = STEALTH_SEED
) -> list[tuple[list[int], list[int]]] | None:
    """(train, test) index lists of the stratified group k-fold (module docstring), k = min(5, distinct
    groups of either class); None when a class has fewer than 2 groups. No group is on both sides."""
    from sklearn.model_selection import StratifiedGroupKFold

    k = min(5, *(len({g for g, y in zip(groups, labels, strict=True) if y == c}) for c in (0, 1)))
    if k < 2:
        return None
    folds = StratifiedGroupKFold(n_splits=k, shuffle=True, random_state=seed)
    return [(tr.tolist(), te.tolist()) for tr, te in folds.split(list(labels), list(labels), list(groups))]


def roc_auc(labels: Any, scores: Any) -> float:
    """ROC AUC of ``scores`` for 0/1 ``labels`` in its Mann-Whitney form (ties count half): sklearn's
    roc_auc_score's value for two classes (equal to a few ulps), without its input validation, which cost
    9 ms a call and 95 % of a world build's time over the bootstrap's replicates."""
    import numpy as np
    from scipy.stats import rankdata

    pos = np.asarray(labels) == 1
    n1, n0 = int(pos.sum()), int((~pos).sum())
    return float((rankdata(np.asarray(scores, dtype=float))[pos].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def auc_interval(
    labels: Sequence[int], scores: Sequence[float], groups: Sequence[str], seed: int = STEALTH_SEED
) -> tuple[float, float]:
    """95% percentile interval of the ROC AUC of ``scores`` from ``N_BOOT`` replicates that resample
    ``groups`` with replacement within each class (seeded by ``seed``; the scores are not recomputed)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    y, s = np.asarray(labels), np.asarray(scores, dtype=float)
    members: dict[int, dict[str, list[int]]] = {0: {}, 1: {}}  # class -> group -> item indices
    for i, (g, lab) in enumerate(zip(groups, labels, strict=True)):
        members[lab].setdefault(g, []).append(i)
    pools = {c: [np.asarray(v) for _, v in sorted(members[c].items())] for c in (0, 1)}
    aucs = []
    for _ in range(N_BOOT):
        idx = np.concatenate(
            [pools[c][i] for c in (0, 1) for i in rng.integers(0, len(pools[c]), len(pools[c]))]
        )
        aucs.append(roc_auc(y[idx], s[idx]))
    lo, hi = np.percentile(aucs, [2.5, 97.5])
    return round(float(lo), 4), round(float(hi), 4)


def _oof_scores(texts: list[str], labels: list[int], folds: list[tuple[list[int], list[int]]]) -> list[float]:
    scores = [0.0] * len(texts)
    for train, test in folds:
        model = _classifier().fit([texts[i] for i in train], [labels[i] for i in train])
        for i, v in zip(test, model.decision_function([texts[i] for i in test]), strict=True):
            scores[i] = float(v)
    return scores


def stealth_check(
    injected: Sequence[str],
    benign: Sequence[str],
    inj_groups: Sequence[str] | None = None,
    ben_groups: Sequence[str] | None = None,
    seed: int = STEALTH_SEED,
) -> dict[str, Any]:
    """{auc, auc_lo, auc_hi, length_auc, length_auc_lo, length_auc_hi, n_injected_groups, n_benign_groups}
    of ``injected`` (positives) against ``benign`` (module docstring); the AUCs and intervals are None when a
    class has fewer than 2 groups. Groups default to one per item."""
    from sklearn.metrics import roc_auc_score

    groups = _groups(injected, inj_groups, "i") + _groups(benign, ben_groups, "b")
    labels = [1] * len(injected) + [0] * len(benign)
    texts = [t[:TEXT_CAP] for t in (*injected, *benign)]
    out: dict[str, Any] = {
        "n_injected_groups": len(set(groups[: len(injected)])),
        "n_benign_groups": len(set(groups[len(injected) :])),
    }
    out |= dict.fromkeys(("auc", "auc_lo", "auc_hi", "length_auc", "length_auc_lo", "length_auc_hi"))
    folds = grouped_folds(labels, groups, seed) if injected and benign else None
    if folds is None:
        return out
    for name, scores in (("auc", _oof_scores(texts, labels, folds)), ("length_auc", [len(t) for t in texts])):
        out[name] = round(float(roc_auc_score(labels, scores)), 4)
        out[f"{name}_lo"], out[f"{name}_hi"] = auc_interval(labels, scores, groups, seed)
    return out


def stealth_auc(
    injected: Sequence[str],
    benign: Sequence[str],
    inj_groups: Sequence[str] | None = None,
    ben_groups: Sequence[str] | None = None,
    seed: int = STEALTH_SEED,
) -> float | None:
    """Out-of-fold ROC AUC of the character n-gram classifier (module docstring) over grouped folds; None
    when either class has fewer than 2 groups."""
    return stealth_check(injected, benign, inj_groups, ben_groups, seed)["auc"]


def length_auc(injected: Sequence[str], benign: Sequence[str]) -> float | None:
    """ROC AUC of an item's length alone (characters, up to ``TEXT_CAP``) as the injected score: the
    length-only baseline of ``stealth_auc``; None when either class has fewer than 2 items."""
    from sklearn.metrics import roc_auc_score

    if min(len(injected), len(benign)) < 2:
        return None
    lengths = [len(t[:TEXT_CAP]) for t in (*injected, *benign)]
    labels = [1] * len(injected) + [0] * len(benign)
    return round(float(roc_auc_score(labels, lengths)), 4)


def stealth_features(injected: Sequence[str], benign: Sequence[str], n: int = TOP_FEATURES) -> list[str]:
    """The ``n`` character n-grams that most mark an item as injected: the largest coefficients of the same
    classifier fitted once on every item (what the AUC's separation rests on); [] when ``stealth_auc`` is
    undefined."""
    if min(len(injected), len(benign)) < 2:
        return []
    model = _classifier().fit(
        [t[:TEXT_CAP] for t in (*injected, *benign)], [1] * len(injected) + [0] * len(benign)
    )
    vec, clf = model.steps[0][1], model.steps[1][1]
    names, coef = vec.get_feature_names_out(), clf.coef_[0]
    return [str(names[i]) for i in sorted(range(len(coef)), key=lambda i: (-coef[i], names[i]))[:n]]


def stealth_report(
    tasks: Sequence[GeneratedTask], seed: int = 0, items: Sequence[dict[str, list[str]]] | None = None
) -> dict[str, dict[str, Any]]:
    """``vector_stealth`` over the built ``tasks`` (``items``: their ``world_items``, if already read) and
    their reference attack set; ``seed`` (the config seed) also seeds the folds and the bootstrap."""
    items = items if items is not None else [world_items(t.world) for t in tasks]
    return vector_stealth(reference_attacks(tasks, seed), items, seed)


def vector_stealth(
    instances: Sequence[AttackInstance], items: Sequence[dict[str, list[str]]], seed: int = STEALTH_SEED
) -> dict[str, dict[str, Any]]:
    """{vector: ``stealth_check``'s fields, n_injected, n_benign, top_features} of ``instances``' injected
    items against the benign items of the worlds whose ``world_items`` are ``items``."""
    inj, ben = injected_groups(instances), benign_groups(items)
    out = {}
    for v in STEALTH_VECTORS:
        it, ig = [t for t, _ in inj[v]], [g for _, g in inj[v]]
        bt, bg = [t for t, _ in ben[v]], [g for _, g in ben[v]]
        check = stealth_check(it, bt, ig, bg, seed)
        out[v] = {
            **check,
            "n_injected": len(it),
            "n_benign": len(bt),
            "top_features": stealth_features(it, bt) if check["auc"] is not None else [],
        }
    return out


def shape_report(
    tasks: Sequence[GeneratedTask], items: Sequence[dict[str, list[str]]] | None = None
) -> dict[str, Any]:
    """Lines and distinct line shapes per world and across the set (``items``: the worlds' ``world_items``,
    if already read)."""
    items = items if items is not None else [world_items(t.world) for t in tasks]
    per, union = {}, set()
    for t, it in zip(tasks, items, strict=True):
        n, shapes = world_shapes(it)
        per[t.record.task_id] = {"n_lines": n, "n_shapes": len(shapes)}
        union |= shapes
    return {
        "per_task": per,
        "n_shapes_all": len(union),
        "n_lines_all": sum(p["n_lines"] for p in per.values()),
    }
