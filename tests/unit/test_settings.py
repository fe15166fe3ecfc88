"""Settings: read from the environment only, validated with errors that name the variable."""

from __future__ import annotations

import pytest

from memstack.bootstrap import build
from memstack.errors import InvalidInput
from memstack.settings import (
    DEFAULT_LOCAL_EMBEDDER,
    Settings,
    default_embedder,
    env_names,
    from_environment,
    load_settings,
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.startswith(("MEMSTACK_", "OPENAI_", "AWS_")):
            monkeypatch.delenv(name)


def test_given_no_environment_when_loaded_then_the_embedded_default_offline() -> None:
    s = load_settings()
    assert s.backend == "sqlite"
    assert s.embedder_name == DEFAULT_LOCAL_EMBEDDER == "wordllama"
    assert s.table == "memstack" and s.opensearch_service == "aoss" and s.knn_engine == "faiss"
    assert s.api_key() is None and s.region is None and not s.create_resources


def test_given_an_openai_key_or_none_when_no_embedder_is_named_then_one_rule_picks_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert default_embedder(openai_key=False) == DEFAULT_LOCAL_EMBEDDER
    assert default_embedder(openai_key=True) == "openai"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert load_settings().embedder_name == "openai"


def test_given_aws_environment_when_loaded_then_every_name_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMSTACK_BACKEND", "aws")
    monkeypatch.setenv("MEMSTACK_TABLE", "mem-prod")
    monkeypatch.setenv("MEMSTACK_BUCKET", "mem-bodies")
    monkeypatch.setenv("MEMSTACK_OPENSEARCH_ENDPOINT", "https://abc.us-east-1.aoss.amazonaws.com/")
    monkeypatch.setenv("MEMSTACK_OPENSEARCH_SERVICE", "es")
    monkeypatch.setenv("MEMSTACK_MESSAGE_TTL_SECONDS", "86400")
    monkeypatch.setenv("MEMSTACK_DYNAMODB_ENDPOINT_URL", "http://127.0.0.1:5000")
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    s = load_settings()
    assert (s.backend, s.table, s.bucket) == ("aws", "mem-prod", "mem-bodies")
    assert s.opensearch_endpoint == "https://abc.us-east-1.aoss.amazonaws.com"
    assert s.opensearch_service == "es" and s.message_ttl_seconds == 86400
    assert s.dynamodb_endpoint_url == "http://127.0.0.1:5000" and s.region == "eu-west-1"
    assert s.embedder_name == "openai" and s.api_key() == "sk-test"


def test_given_a_key_when_settings_are_printed_then_it_is_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-value")
    assert "sk-secret-value" not in repr(load_settings())


def test_given_memstack_region_and_aws_region_when_loaded_then_memstack_region_wins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    monkeypatch.setenv("MEMSTACK_REGION", "us-west-2")
    assert load_settings().region == "us-west-2"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("MEMSTACK_BACKEND", "postgres"),
        ("MEMSTACK_OPENSEARCH_ENDPOINT", "search.example.com"),
        ("MEMSTACK_OPENSEARCH_SERVICE", "nmslib"),
        ("MEMSTACK_MESSAGE_TTL_SECONDS", "0"),
        ("MEMSTACK_TABLE", "a b"),
        ("MEMSTACK_EMBEDDING_DIMENSIONS", "many"),
        ("MEMSTACK_OPENSEARCH_ENGINE", "nmslib"),
    ],
)
def test_given_a_malformed_value_when_loaded_then_invalid_input_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(InvalidInput) as err:
        load_settings()
    assert err.value.field == name and name in str(err.value)


def test_given_no_engine_when_loaded_then_faiss_on_serverless_and_lucene_on_domains() -> None:
    assert load_settings(opensearch_service="aoss").knn_engine == "faiss"
    assert load_settings(opensearch_service="es").knn_engine == "lucene"
    assert load_settings(opensearch_service="none").knn_engine == "lucene"
    assert load_settings(opensearch_service="aoss", opensearch_engine="lucene").knn_engine == "lucene"


def test_given_overrides_when_loaded_then_they_win_over_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MEMSTACK_BACKEND", "aws")
    assert load_settings(backend="sqlite").backend == "sqlite"


def test_given_the_settings_model_when_env_names_are_listed_then_each_field_has_its_variable() -> None:
    names = env_names()
    assert set(names) == set(Settings.model_fields)
    assert (
        names["backend"] == "MEMSTACK_BACKEND"
        and names["opensearch_endpoint"] == "MEMSTACK_OPENSEARCH_ENDPOINT"
    )
    assert names["region"] == "MEMSTACK_REGION"


def test_given_the_sqlite_backend_when_built_then_memory_uses_the_configured_file(tmp_path: object) -> None:
    from pathlib import Path

    db = Path(str(tmp_path)) / "m.db"
    with build(load_settings(db_path=db), embedder="hash") as memory:
        memory.save_messages(thread_id="t1", resource_id="r1", messages=["hello there"])
    assert db.is_file()


def test_given_the_aws_backend_without_an_opensearch_endpoint_when_built_then_invalid_input_names_it() -> (
    None
):
    with pytest.raises(InvalidInput) as err:
        build(load_settings(backend="aws"), embedder="hash")
    assert err.value.field == "MEMSTACK_OPENSEARCH_ENDPOINT"


def test_given_chat_settings_when_the_chat_model_is_made_then_name_key_and_endpoint_come_from_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from memstack.bootstrap import make_chat_model

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("MEMSTACK_CHAT_MODEL", "llama-3.1-8b")
    model = make_chat_model()
    assert model.model_id == "openai/llama-3.1-8b"


def test_given_no_key_when_the_chat_model_is_made_then_invalid_input_names_the_key() -> None:
    from memstack.bootstrap import make_chat_model

    with pytest.raises(InvalidInput) as err:
        make_chat_model()
    assert err.value.field == "api_key"


def test_given_no_embedder_when_memory_local_is_built_then_the_default_embedder_is_used() -> None:
    from memstack import Memory

    with Memory.local(":memory:") as memory:
        assert memory.embedder.model_id == "wordllama-l2_supercat-256"


def test_given_names_in_another_case_when_loaded_then_they_are_read_as_pydantic_settings_read_them() -> None:
    environ = {
        "memstack_backend": "aws",
        "Aws_Default_Region": "eu-west-1",
        "MEMSTACK_CREATE_RESOURCES": "true",
    }
    s = Settings.model_validate(from_environment(environ))
    assert (s.backend, s.region, s.create_resources) == ("aws", "eu-west-1", True)


def test_given_settings_when_loaded_then_pydantic_settings_is_not_imported() -> None:
    """The settings are a plain model (no pydantic-settings import on a function's cold start)."""
    import subprocess
    import sys
    from pathlib import Path

    shared = Path(__file__).resolve().parents[2] / "shared"
    code = "import sys; from memstack.settings import load_settings; load_settings(); print('pydantic_settings' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(shared)},
        timeout=60,
    )
    assert out.stdout.strip() == "False", out.stderr
