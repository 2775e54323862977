"""ReasoningBank: item cap and provenance, top-1 retrieval over past task queries, the embedders."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from test_methods_common import ScriptedBackend, make_rollout

from evoaudit import config as config_mod
from evoaudit.config import EmbedderConfig
from evoaudit.methods import reasoningbank as rb
from evoaudit.methods.artifact import ArtifactMeta, write_artifact
from evoaudit.methods.conditions import Insertion, condition
from evoaudit.methods.embed import HashedNgramEmbedder, cosine

LOCAL = EmbedderConfig(backend="local", model="hashed-ngrams", base_url=None, api_key_env=None, dims=512)


def _item(title: str, content: str, prov: str = "success") -> rb.MemoryItem:
    return rb.MemoryItem(title=title, description="d", content=content, provenance=prov)


def _bank_dir(tmp_path: Path) -> Path:
    entries = [
        # Entry 0's *memory text* is about rent, but its *query* is about a password.
        rb.BankEntry(
            entry_id="a",
            query="Change my account password to something new",
            family="f0",
            label=True,
            items=[_item("Rent", "Pay the monthly rent to the landlord")],
        ),
        rb.BankEntry(
            entry_id="b",
            query="Pay my monthly rent to the landlord as usual",
            family="f1",
            label=False,
            items=[_item("Pw", "Update the password", "failure"), _item("Pw2", "Then confirm", "failure")],
        ),
    ]
    bank = rb.Bank(
        embedder=LOCAL, query_instruction="Find similar requests", top_k=1, preamble="P.", entries=entries
    )
    vectors = HashedNgramEmbedder(LOCAL.dims).embed([e.query for e in entries])
    out = tmp_path / "reasoningbank"
    write_artifact(
        out, ArtifactMeta(method="reasoningbank", lineage="L1", state_files=[]), rb.bank_state(bank, vectors)
    )
    return out


def test_retrieval_matches_past_queries_not_memory_text_and_inserts_all_items_of_the_top_task(tmp_path):
    retriever = rb.Retriever(_bank_dir(tmp_path))
    hits = retriever.retrieve("Please pay the rent for this month to my landlord")
    assert [e.entry_id for e, _ in hits] == ["b"]  # top-1 by query, although entry a's items mention rent
    sections = retriever.sections("Please pay the rent for this month to my landlord")
    assert len(sections) == 1 and sections[0][0] == "Memory"
    body = sections[0][1]
    assert body.startswith("P.\n\n") and "Update the password" in body and "Then confirm" in body
    assert "landlord" not in body  # nothing of the other task's items
    assert [e.entry_id for e, _ in retriever.retrieve("I want a new password for my account")] == ["a"]


def test_current_query_is_wrapped_in_the_instruction_before_embedding(tmp_path, monkeypatch):
    seen = []
    retriever = rb.Retriever(_bank_dir(tmp_path))
    monkeypatch.setattr(rb, "_embed_one", lambda emb, text: seen.append(text) or [0.0] * LOCAL.dims)
    retriever.retrieve("pay rent")
    assert seen == ["Instruct: Find similar requests\nQuery: pay rent"]


def test_retrieval_runs_per_episode_through_the_condition_insertion(tmp_path):
    ins = Insertion(condition("reasoningbank"), _bank_dir(tmp_path))
    assert ins.per_query
    assert "Update the password" in ins.sections("pay the landlord the rent")[0][1]
    assert "Pay the monthly rent" in ins.sections("set a new account password")[0][1]
    with pytest.raises(ValueError, match="query"):
        ins.sections(None)


def test_distillation_caps_items_per_trajectory_and_keeps_provenance():
    five = json.dumps(
        {"memories": [{"title": f"t{i}", "description": "d", "content": "c"} for i in range(5)]}
    )
    items = rb.parse_items(five, 3, "failure")
    assert len(items) == 3 and {i.provenance for i in items} == {"failure"}
    cfg = config_mod.from_dict({"methods_params": {"reasoningbank": {"embedder": {"dims": 128}}}})
    labelled = [
        (make_rollout("user_task_1", "v0", True), True),
        (make_rollout("user_task_2", "v0", False), False),
    ]
    bank, vectors, diag = asyncio.run(
        rb.build_bank(config_mod.method_settings(cfg), "L1", labelled, ScriptedBackend([five]))
    )
    assert [len(e.items) for e in bank.entries] == [3, 3]
    assert [i.provenance for i in bank.entries[1].items] == ["failure"] * 3
    assert diag["items"] == 6 and diag["items_from_failures"] == 3 and diag["entries"] == 2
    assert diag["embedder"] == {"backend": "local", "model": "hashed-ngrams", "dims": 128}
    assert len(vectors) == 2 and len(vectors[0]) == 128


def test_a_distillation_that_stays_malformed_is_recorded_and_skipped():
    cfg = config_mod.from_dict({"methods_params": {"max_attempts": 2}})
    labelled = [(make_rollout("user_task_1", "v0", True), True)]
    backend = ScriptedBackend(['{"memories": [{"title": ""}]}'])
    bank, _, diag = asyncio.run(rb.build_bank(config_mod.method_settings(cfg), "L1", labelled, backend))
    assert bank.entries == [] and diag["n_failed_distillations"] == 1 and len(backend.requests) == 2


def test_local_embedder_is_deterministic_and_similarity_ranks_related_text_higher():
    emb = HashedNgramEmbedder(256)
    a, b, c = emb.embed(["send money to my landlord", "send money to the landlord", "update my password"])
    assert emb.embed(["send money to my landlord"])[0] == a
    assert cosine(a, b) > cosine(a, c)


def test_each_episode_records_what_it_retrieved_with_item_provenance(tmp_path):
    ins = Insertion(condition("reasoningbank"), _bank_dir(tmp_path))
    rec = ins.retrieval("pay the landlord the rent")
    assert rec is not None and rec["entries"] == ["b"] and rec["families"] == ["f1"]
    assert rec["provenance"] == ["failure", "failure"] and 0 < rec["similarity"][0] <= 1
    assert Insertion(condition("static"), _static(tmp_path)).retrieval("anything") is None


def _static(tmp_path: Path) -> Path:
    out = tmp_path / "static"
    write_artifact(out, ArtifactMeta(method="static", lineage="L1", state_files=[]), {})
    return out


def test_openai_embedder_reads_an_embeddings_endpoint_and_is_recorded(tmp_path):
    import http.server
    import threading

    local = HashedNgramEmbedder(64)
    bodies = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - the http.server hook name
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            bodies.append(body)
            data = [
                {"object": "embedding", "index": i, "embedding": v}
                for i, v in enumerate(local.embed(body["input"]))
            ]
            out = json.dumps(
                {
                    "object": "list",
                    "data": data,
                    "model": body["model"],
                    "usage": {"prompt_tokens": 1, "total_tokens": 1},
                }
            )
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out.encode())

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        emb = {"backend": "openai", "model": "emb-test", "base_url": url}
        cfg = config_mod.from_dict({"methods_params": {"reasoningbank": {"embedder": emb}}})
        labelled = [(make_rollout("user_task_1", "v0", True, prompt="pay my rent"), True)]
        reply = json.dumps({"memories": [{"title": "t", "description": "d", "content": "c"}]})
        bank, vectors, diag = asyncio.run(
            rb.build_bank(config_mod.method_settings(cfg), "L1", labelled, ScriptedBackend([reply]))
        )
        assert diag["embedder"] == {"backend": "openai", "model": "emb-test", "base_url": url}
        assert bodies[0]["input"] == ["pay my rent"] and vectors == local.embed(["pay my rent"])
        out = tmp_path / "rb"
        write_artifact(
            out,
            ArtifactMeta(method="reasoningbank", lineage="L1", state_files=[]),
            rb.bank_state(bank, vectors),
        )
        hits = rb.Retriever(out).retrieve("rent please")
        assert [e.entry_id for e, _ in hits] == [bank.entries[0].entry_id]
        assert bodies[-1]["input"] == [
            rb.wrap_query(cfg.methods_params.reasoningbank.query_instruction, "rent please")
        ]
    finally:
        server.shutdown()
