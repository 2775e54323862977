"""ReasoningBank retrieval provenance, recomputed from a hand-built frozen bank."""

from __future__ import annotations

from rollout_kit import mk

from evoaudit.config import EmbedderConfig
from evoaudit.methods import reasoningbank as rb
from evoaudit.methods.embed import HashedNgramEmbedder
from evoaudit.records import Message
from evoaudit.report.retrieval import retrieved_provenance

QUERIES = {
    "pay": "Please pay the rent bill for December to my landlord",
    "look": "What was the largest transaction in my history last spring?",
}


def _bank_dir(tmp_path, backend: str = "local"):
    def item(prov: str) -> rb.MemoryItem:
        return rb.MemoryItem(title=prov, description="d", content="c", provenance=prov)

    bank = rb.Bank(
        embedder=EmbedderConfig(
            backend=backend, model="hashed-ngrams", base_url=None, api_key_env=None, dims=256
        ),
        query_instruction="Given a banking request, retrieve similar past requests",
        top_k=1,
        preamble="Memory:",
        entries=[
            rb.BankEntry(
                entry_id="a", query=QUERIES["pay"], family="f1", label=True, items=[item("success")]
            ),
            rb.BankEntry(
                entry_id="b", query=QUERIES["look"], family="f2", label=False, items=[item("failure")]
            ),
        ],
    )
    vectors = HashedNgramEmbedder(256).embed(list(QUERIES.values()))
    d = tmp_path / "L1" / "reasoningbank"
    d.mkdir(parents=True)
    for name, text in rb.bank_state(bank, vectors).items():
        (d / name).write_text(text)
    return d


def _episode(goal: str, query: str):
    return mk(
        "L1",
        "reasoningbank",
        goal=goal,
        messages=[Message(role="system", content="s"), Message(role="user", content=query)],
    )


def test_each_episode_is_labelled_by_the_provenance_of_its_top_task(tmp_path):
    d = _bank_dir(tmp_path)
    pay, look = _episode("injection_task_1", QUERIES["pay"]), _episode("injection_task_2", QUERIES["look"])
    other = mk("L1", "static", messages=[Message(role="user", content=QUERIES["pay"])])
    got = retrieved_provenance([pay, look, other], {("L1", "reasoningbank"): d})
    assert got == {pay.rollout_id: "success", look.rollout_id: "failure"}


def test_endpoint_embedders_are_not_called_again(tmp_path):
    d = _bank_dir(tmp_path, backend="openai")
    assert (
        retrieved_provenance([_episode("injection_task_1", QUERIES["pay"])], {("L1", "reasoningbank"): d})
        == {}
    )
