"""End to end: the JWT rule over real HTTP. ``memstack serve --auth jwt`` reads the claims a JWT authorizer
would set from the ``X-Memstack-Claims`` header (local testing only) and the API's own check decides: the
request's ``resource_id`` must equal the claim, else 403 ``forbidden`` — also when the claim is missing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from memstack import Forbidden, InvalidInput
from memstack.client import MemstackClient
from tests.e2e.serve_support import Served, running_serve

CLAIMS = "X-Memstack-Claims"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("serve-jwt")
    with running_serve(
        "--auth", "jwt", "--db", str(folder / "memory.db"), "--embedder", "hash", cwd=folder
    ) as s:
        yield s


def as_token(served: Served, claims: dict[str, object] | None, resource_id: str) -> MemstackClient:
    headers = {CLAIMS: json.dumps(claims)} if claims is not None else None
    return MemstackClient(served.url, resource_id=resource_id, headers=headers)


def test_given_the_matching_claim_when_alice_works_in_her_resource_then_it_is_served(served: Served) -> None:
    with as_token(served, {"sub": "alice", "email": "a@example.com"}, "alice") as alice:
        alice.save_messages(thread_id="a-1", messages=["hello"])
        assert [m.text for m in alice.list_messages(thread_id="a-1").messages] == ["hello"]
        assert alice.context(thread_id="a-1", message="again").messages[0].text == "hello"
    assert "jwt claims come UNVERIFIED" in served.stdout[0], "the banner says it is for local testing"


def test_given_another_resource_when_alice_asks_for_bob_then_403_forbidden_before_any_read(
    served: Served,
) -> None:
    with as_token(served, {"sub": "bob"}, "bob") as bob:
        bob.save_messages(thread_id="b-1", messages=["bob's note"])

    with as_token(served, {"sub": "alice"}, "bob") as alice_as_bob:
        for call in (
            lambda: alice_as_bob.list_messages(thread_id="b-1"),
            lambda: alice_as_bob.save_messages(thread_id="b-1", messages=["overwrite"]),
            lambda: alice_as_bob.recall(thread_id="b-1", query="note"),
            lambda: alice_as_bob.list_threads(),
        ):
            with pytest.raises(Forbidden) as refused:
                call()
            assert (refused.value.code, refused.value.field, refused.value.status) == (
                "forbidden",
                "resource_id",
                403,
            )

    with as_token(served, {"sub": "bob"}, "bob") as bob:
        assert [m.text for m in bob.list_messages(thread_id="b-1").messages] == ["bob's note"]


@pytest.mark.parametrize("claims", [None, {}, {"email": "a@example.com"}, {"sub": True}])
def test_given_no_usable_claim_when_a_resource_route_is_called_then_403_forbidden(
    served: Served, claims: dict[str, object] | None
) -> None:
    with as_token(served, claims, "alice") as anonymous, pytest.raises(Forbidden) as refused:
        anonymous.list_threads()

    assert refused.value.code == "forbidden"
    assert "claim" in refused.value.message


def test_given_no_claims_when_health_is_called_then_it_answers(served: Served) -> None:
    with as_token(served, None, "nobody") as anonymous:
        assert anonymous.health()["status"] == "ok"


def test_given_a_malformed_claims_header_when_sent_then_400_naming_the_header(served: Served) -> None:
    broken = MemstackClient(served.url, resource_id="alice", headers={CLAIMS: "not json"})
    with broken, pytest.raises(InvalidInput) as bad:
        broken.list_threads()
    assert bad.value.field == "x-memstack-claims"


def test_given_iam_mode_when_a_claims_header_is_sent_then_it_is_ignored(tmp_path: Path) -> None:
    folder = tmp_path
    with running_serve("--db", str(folder / "m.db"), "--embedder", "hash", cwd=folder) as iam:
        response = httpx.get(
            f"{iam.url}/v1/threads",
            params={"resource_id": "bob"},
            headers={CLAIMS: json.dumps({"sub": "alice"})},
        )
    assert response.status_code == 200, "iam mode trusts resource_id (API Gateway checked SigV4)"


def test_given_a_configured_claim_name_when_served_then_that_claim_binds_the_resource(
    tmp_path: object,
) -> None:
    from pathlib import Path

    folder = Path(str(tmp_path))
    env = {"MEMSTACK_AUTH": "jwt", "MEMSTACK_JWT_RESOURCE_CLAIM": "custom:tenant"}
    with running_serve("--db", str(folder / "m.db"), "--embedder", "hash", cwd=folder, env=env) as s:
        with as_token(s, {"sub": "someone", "custom:tenant": "acme"}, "acme") as tenant:
            assert tenant.list_threads().threads == ()
        with as_token(s, {"sub": "acme"}, "acme") as wrong_claim, pytest.raises(Forbidden):
            wrong_claim.list_threads()
