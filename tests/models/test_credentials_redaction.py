"""Credentials in an endpoint URL: redacted in every copy of the configuration a run writes, hashes or
prints, while the job that calls the endpoint still gets them (from the configuration the user wrote)."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import pytest
from conftest import copy_workflow, snakemake
from quirk_server_kit import QuirkHandler

from evoaudit import config as config_mod
from evoaudit.config import ConfigError, stage_digest
from evoaudit.credentials import public_config, redact_url, split_credentials
from evoaudit.models import preflight
from evoaudit.models.http import Reply, ServerThread
from evoaudit.provenance import config_sha256, provenance
from evoaudit.transfer_config import evaluation_config, write_transfer_config

PASSWORD = "pw-SENTINEL-4b8e1d"
URL = f"http://auditor:{PASSWORD}@127.0.0.1:9/v1"


def _cfg(url: str = URL, transfer_url: str | None = URL) -> config_mod.Config:
    transfer = {"executor": {"backend": "openai", "base_url": transfer_url}} if transfer_url else {}
    return config_mod.from_dict(
        {
            "executor": {"backend": "openai", "base_url": url},
            "transfer": transfer | {"conditions": ["static"]},
            "conditions": ["static"],
            "methods": ["static"],
        }
    )


@pytest.mark.parametrize(
    ("url", "redacted"),
    [
        (URL, "http://REDACTED@127.0.0.1:9/v1"),
        ("https://token@example.org/v1?x=1", "https://REDACTED@example.org/v1?x=1"),
        ("http://u:p@[::1]:8080/v1", "http://REDACTED@[::1]:8080/v1"),
        ("http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1"),
    ],
)
def test_a_url_loses_its_user_information_and_keeps_the_rest(url, redacted):
    assert redact_url(url) == redacted
    assert split_credentials(redact_url(url))[0] == split_credentials(url)[0]


def test_every_base_url_in_a_dumped_configuration_is_redacted_at_any_depth():
    data = {"executor": {"base_url": URL}, "x": [{"embedder": {"base_url": URL}}], "base_url": None}
    public = public_config(data)
    assert PASSWORD not in json.dumps(public) and public_config(public) == public
    assert data["executor"]["base_url"] == URL  # a copy: the configuration itself keeps them


@pytest.mark.parametrize(
    "override, field",
    [
        ({"executor": {"backend": "openai", "base_url": URL, "api_key_env": "KEY"}}, "executor.api_key_env"),
        (
            {"apex": {"judge": {"backend": "openai", "base_url": URL, "api_key_env": "K"}}},
            "apex.judge.api_key_env",
        ),
        (
            {"apex": {"models": [{"id": "m", "executor": {"base_url": URL, "api_key_env": "K"}}]}},
            "apex.models.0.executor.api_key_env",
        ),
    ],
)
def test_an_endpoint_with_url_credentials_and_an_api_key_is_refused_naming_the_field(override, field):
    # Both go in the one Authorization header: one would silently replace the other.
    with pytest.raises(ConfigError, match=field):
        config_mod.from_dict(override, "test")
    config_mod.from_dict({"executor": {"backend": "openai", "base_url": URL}}, "test")  # one kind: fine


def test_provenance_and_hashes_do_not_depend_on_the_password():
    a, b = _cfg(), _cfg(URL.replace(PASSWORD, "another-one"), URL.replace(PASSWORD, "another-one"))
    assert PASSWORD not in json.dumps(provenance(a, stage="t"))
    assert config_sha256(a) == config_sha256(b) and stage_digest(a, "episode") == stage_digest(b, "episode")
    plain = _cfg("http://127.0.0.1:9/v1", None)
    # Unchanged for a URL without credentials: the hash of the plain dump, as recorded before redaction.
    blob = json.dumps(config_mod.stage_config(plain, "config"), sort_keys=True, separators=(",", ":"))
    assert config_sha256(plain) == hashlib.sha256(blob.encode()).hexdigest()


def test_the_transfer_record_is_redacted_and_the_job_gets_the_credentials_back(tmp_path):
    cfg, out = _cfg(), tmp_path / "transfer" / "config.json"
    write_transfer_config(cfg, out)
    assert PASSWORD not in out.read_text() and "REDACTED@127.0.0.1:9" in out.read_text()
    derived = evaluation_config(cfg, out)
    assert derived.executor.base_url == URL and derived.transfer.enabled is False


def test_a_transfer_record_that_differs_from_the_derivation_is_refused_naming_it(tmp_path):
    cfg, out = _cfg(), tmp_path / "config.json"
    write_transfer_config(cfg, out)
    data = json.loads(out.read_text())
    data["suite"]["goals"] = ["injection_task_1"]
    out.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=r"config\.json: differs .* in \['suite'\]"):
        evaluation_config(cfg, out)


class _BasicAuthOnly:
    """Answers 401 unless the request carries the expected basic-auth credentials."""

    def __init__(self, inner, user: str, password: str) -> None:
        self.inner = inner
        self.expected = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        self.refused = 0

    async def __call__(self, req):
        if req.headers.get("authorization") != self.expected:
            self.refused += 1
            return Reply.error(401, "basic auth required", "invalid_api_key")
        return await self.inner(req)


def test_preflight_sends_url_credentials_as_basic_auth_and_records_no_url_with_them(tmp_path, caplog):
    # No render endpoint on this server: the probe's log line names each URL it tried.
    handler = _BasicAuthOnly(QuirkHandler(), "auditor", PASSWORD)
    with ServerThread(handler) as srv:
        url = srv.base_url.replace("http://", f"http://auditor:{PASSWORD}@")
        cfg = config_mod.from_dict(
            {"executor": {"backend": "openai", "base_url": url, "model": "quirk-model", "timeout_s": 5}}
        )
        with caplog.at_level("INFO", logger="evoaudit.models.preflight"):
            found = preflight.check(cfg)["executor"]
    assert handler.refused == 0 and found["served_models"] == ["quirk-model"]
    notes = json.dumps(found) + caplog.text
    assert "apply-template" in caplog.text and PASSWORD not in notes and "auditor" not in notes


def test_the_resolved_config_and_rerun_triggers_hold_no_password(tmp_path):
    small = {"lineages": ["L1"], "methods": ["static"], "conditions": ["static"]}
    ep = {"backend": "openai", "base_url": URL, "wire": {"preflight": False}}
    copy_workflow(tmp_path, small | {"executor": ep, "transfer": {"conditions": ["static"], "executor": ep}})
    proc = snakemake(tmp_path, "-n", "--forceall")
    assert not (tmp_path / "results").exists()  # a dry run writes nothing
    written = snakemake(tmp_path, "results/config/config.json")  # rule resolved_config
    resolved = json.loads((tmp_path / "results/config/config.json").read_text())
    assert resolved["executor"]["base_url"] == "http://REDACTED@127.0.0.1:9/v1"
    assert resolved["transfer"]["executor"]["base_url"] == "http://REDACTED@127.0.0.1:9/v1"
    assert PASSWORD not in proc.stdout + proc.stderr + written.stdout + written.stderr
    for path in Path(tmp_path, "results").rglob("*"):
        assert not path.is_file() or PASSWORD.encode() not in path.read_bytes(), path
