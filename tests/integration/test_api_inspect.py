"""The inspection routes with API Gateway REST proxy events: recall hits with each retriever's own score,
what the model sees layer by layer (``POST /v1/threads/{thread_id}/inspect``) and index health
(``GET /v1/index-health``)."""

from __future__ import annotations

from typing import Any

import pytest

from memstack.adapters.testing import ScriptedChatModel
from memstack.api import AuthConfig, create_app
from memstack.memory import Memory
from tests.integration.events import Api
from tests.observation_support import om_memory, save_sentences

T = "trip"


@pytest.fixture
def api(memory: Memory) -> Api:
    return Api(create_app(memory, auth=AuthConfig()).resolve, "user-a")


def save(api: Api, texts: list[str], thread_id: str = T) -> list[dict[str, Any]]:
    messages = [
        {"id": f"{thread_id}-{i}", "role": "user" if i % 2 else "assistant", "content": text}
        for i, text in enumerate(texts, start=1)
    ]
    reply = api.post(f"/v1/threads/{thread_id}/messages", {"messages": messages})
    assert reply.status == 200, reply.raw
    saved: list[dict[str, Any]] = reply.body["messages"]
    return saved


TEXTS = [
    "We fly to Oslo in March with the cat.",
    "Oslo in March is cold: pack a coat.",
    "What about the ferry to the fjord?",
    "The ferry leaves at nine from the harbour.",
    "Any good cafés near the opera house?",
    "Try the bakery behind the opera house.",
]


def recall(api: Api, query: str, **semantic_recall: Any) -> list[dict[str, Any]]:
    options = {"semantic_recall": {"message_range": 0, **semantic_recall}}
    reply = api.post(f"/v1/threads/{T}/recall", {"query": query, "options": options})
    assert reply.status == 200, reply.raw
    hits: list[dict[str, Any]] = reply.body["hits"]
    return hits


# --- recall: each retriever's score ------------------------------------------------------------------


def test_given_hybrid_recall_then_each_hit_carries_the_scores_each_retriever_gave_it(api: Api) -> None:
    save(api, TEXTS)
    hybrid = recall(api, "ferry to the fjord", mode="hybrid", top_k=6)
    vector = {h["message_id"]: h for h in recall(api, "ferry to the fjord", mode="vector", top_k=6)}
    keyword = {h["message_id"]: h for h in recall(api, "ferry to the fjord", mode="keyword", top_k=6)}
    assert hybrid, "the query matches saved messages"
    for hit in hybrid:
        mid = hit["message_id"]
        if hit["vector_rank"] is not None:
            assert hit["vector_score"] == pytest.approx(vector[mid]["score"]), mid
            assert hit["vector_rank"] == vector[mid]["vector_rank"], mid
        else:
            assert hit["vector_score"] is None
        if hit["keyword_rank"] is not None:
            assert hit["keyword_score"] == pytest.approx(keyword[mid]["score"]), mid
            assert hit["keyword_rank"] == keyword[mid]["keyword_rank"], mid
        else:
            assert hit["keyword_score"] is None
    assert any(h["vector_score"] is not None and h["keyword_score"] is not None for h in hybrid)


def test_given_one_retriever_when_recall_runs_then_the_score_is_its_own_and_the_other_is_null(
    api: Api,
) -> None:
    save(api, TEXTS)
    for hit in recall(api, "opera house bakery", mode="keyword", top_k=3):
        assert hit["keyword_score"] == hit["score"] and hit["vector_score"] is None
    for hit in recall(api, "opera house bakery", mode="vector", top_k=3):
        assert hit["vector_score"] == hit["score"] and hit["keyword_score"] is None


# --- what the model sees -------------------------------------------------------------------------------


def test_given_a_turn_when_inspected_then_the_layers_come_in_order_and_the_tokens_add_up(api: Api) -> None:
    save(api, TEXTS)
    body = {
        "message": "When does the ferry leave?",
        "instructions": "Answer briefly.",
        "context": [{"role": "user", "content": "(the user is on a phone)"}],
    }
    reply = api.post(f"/v1/threads/{T}/inspect", body)
    assert reply.status == 200, reply.raw
    out = reply.body
    layers = [(x["layer"], x["role"], x["messages"]) for x in out["layers"]]
    assert layers == [
        ("instructions", "system", 1),
        ("working_memory", "system", 1),
        ("history", "conversation", len(TEXTS)),
        ("context", "conversation", 1),
        ("message", "conversation", 1),
        ("tools", "tools", 0),
    ]
    context = api.post(f"/v1/threads/{T}/context", {**body, "count_tokens": True}).body
    assert out["token_count"] == context["token_count"]
    assert sum(x["tokens"] for x in out["layers"]) == context["token_count"]
    assert out["openai"] == {"messages": context["messages"], "tools": context["tools"]}
    assert set(out["bedrock"]) == {"system", "messages", "toolConfig"}
    assert out["bedrock"]["system"][0] == {"text": "Answer briefly."}
    assert out["anthropic"]["messages"][-1]["content"][-1]["text"] == "When does the ferry leave?"


def test_given_recall_outside_the_history_when_inspected_then_recalled_and_cross_thread_layers_show(
    api: Api,
) -> None:
    save(api, TEXTS)
    save(api, ["The ferry ticket costs 60 kroner."], thread_id="other")
    body = {
        "message": "ferry ticket kroner",
        "options": {"last_messages": 2, "semantic_recall": {"top_k": 3}},
    }
    out = api.post(f"/v1/threads/{T}/inspect", body).body
    names = [x["layer"] for x in out["layers"]]
    assert names.index("recall") < names.index("recalled") < names.index("history") < names.index("message")
    by_name = {x["layer"]: x for x in out["layers"]}
    shown_recalled = {m["id"] for m in out["conversation"]} & set(out["recalled_ids"]) - set(
        out["history_ids"]
    )
    assert by_name["recalled"]["messages"] == len(shown_recalled) > 0
    assert by_name["history"]["messages"] == 2
    assert by_name["recall"]["role"] == "system" and by_name["recall"]["tokens"] > 0


def test_given_observations_when_inspected_then_the_observations_and_the_reminder_are_layers() -> None:
    om = {"enabled": True, "observation": {"message_tokens": 100, "buffer_tokens": False}}
    with om_memory(ScriptedChatModel(), observational_memory=om) as memory:
        save_sentences(memory, "user-a", T, 1, 10)
        api = Api(create_app(memory, auth=AuthConfig()).resolve, "user-a")
        out = api.post(f"/v1/threads/{T}/inspect", {"message": "and then?"}).body
    names = [x["layer"] for x in out["layers"]]
    assert names[0] == "observations" and names[1] == "reminders", names
    assert next(x for x in out["layers"] if x["layer"] == "reminders")["messages"] == 1


def test_given_an_unknown_body_field_when_inspected_then_400_names_it(api: Api) -> None:
    reply = api.post(f"/v1/threads/{T}/inspect", {"message": "hi", "count_tokens": True})
    assert reply.status == 400
    assert reply.error["code"] == "invalid_input" and reply.error["field"] == "count_tokens"


# --- index health ------------------------------------------------------------------------------------


def health(api: Api, **query: str) -> dict[str, Any]:
    reply = api.get("/v1/index-health", query=query)
    assert reply.status == 200, reply.raw
    body: dict[str, Any] = reply.body
    return body


def test_given_indexed_saves_then_every_message_is_indexed_with_the_embedder_of_the_index(
    api: Api, memory: Memory
) -> None:
    save(api, TEXTS)
    out = health(api)
    assert out["embedding_model"] == memory.embedder.model_id == "hash-256"
    assert out["dimension"] == 256
    assert (out["threads"], out["messages"], out["indexed"], out["not_indexed"], out["stale"]) == (
        1,
        6,
        6,
        0,
        0,
    )
    assert out["complete"] is True and out["samples"] == []


def test_given_a_save_without_indexing_then_it_is_stored_but_not_indexed(api: Api, memory: Memory) -> None:
    save(api, TEXTS)
    memory.index_on_save = False
    saved = save(api, ["Saved while the indexer was down."], thread_id="late")
    out = health(api)
    assert (out["messages"], out["indexed"], out["not_indexed"]) == (7, 6, 1)
    assert out["samples"] == [
        {"thread_id": "late", "message_id": "late-1", "seq": saved[0]["seq"], "state": "not_indexed"}
    ]


def test_given_a_mark_from_other_content_then_the_message_is_stale(api: Api, memory: Memory) -> None:
    save(api, TEXTS)
    memory.store.set_index_marks("user-a", {"trip-2": "made-by-another-embedder"})
    out = health(api)
    assert (out["indexed"], out["stale"]) == (5, 1)
    assert out["samples"][0]["message_id"] == "trip-2" and out["samples"][0]["state"] == "stale"


def test_given_a_limit_then_only_that_many_are_read_and_complete_says_whether_more_exist(api: Api) -> None:
    save(api, TEXTS)
    assert (health(api, limit="4")["messages"], health(api, limit="4")["complete"]) == (4, False)
    assert (health(api, limit="6")["messages"], health(api, limit="6")["complete"]) == (6, True)
    assert health(api, limit="7")["complete"] is True


@pytest.mark.parametrize("limit", ["0", "100001", "x"])
def test_given_a_limit_out_of_range_then_400_names_it(api: Api, limit: str) -> None:
    reply = api.get("/v1/index-health", query={"limit": limit})
    assert reply.status == 400 and reply.error["field"] == "limit"


def test_given_another_resources_messages_then_index_health_never_counts_them(api: Api) -> None:
    save(api, TEXTS)
    assert health(api.as_resource("user-b"))["messages"] == 0


def test_given_no_resource_id_then_index_health_is_400(api: Api) -> None:
    reply = api.get("/v1/index-health", resource_id="")
    assert reply.status == 400 and reply.error["field"] == "resource_id"


# --- through the clients -----------------------------------------------------------------------------


def test_given_the_clients_then_inspect_and_index_health_answer_what_the_library_computes(
    memory: Memory,
) -> None:
    import asyncio

    from memstack.async_client import AsyncMemstackClient
    from memstack.async_memory import AsyncMemory
    from memstack.client import MemstackClient
    from memstack.usecases.inspect import context_layers
    from tests.served import serving

    memory.save_messages(thread_id=T, resource_id="user-a", messages=TEXTS)
    local = memory.context(thread_id=T, resource_id="user-a", message="ferry?", instructions="Be brief.")
    with serving(memory) as url, MemstackClient(url, resource_id="user-a") as client:
        seen = client.inspect_context(thread_id=T, message="ferry?", instructions="Be brief.")
        assert seen.layers == context_layers(local, context_count=0, has_message=True)
        in_process = memory.inspect_context(
            resource_id="user-a", thread_id=T, message="ferry?", instructions="Be brief."
        )
        assert (seen.layers, seen.requests, seen.token_count) == (
            in_process.layers,
            in_process.requests,
            in_process.token_count,
        )
        assert seen.token_count == local.token_count
        assert seen.requests["openai"] == local.to_openai()
        assert seen.requests["bedrock"] == local.to_bedrock()
        assert client.index_health() == memory.index_health(resource_id="user-a")

        async def remote() -> tuple[Any, Any]:
            async with AsyncMemstackClient(url, resource_id="user-a") as aclient:
                return await aclient.inspect_context(
                    thread_id=T, message="ferry?"
                ), await aclient.index_health(limit=3)

        inspected, limited = asyncio.run(remote())
        wrapped = AsyncMemory(memory)
        assert asyncio.run(wrapped.index_health(resource_id="user-a", limit=3)) == limited
        assert [x.layer for x in inspected.layers] == ["working_memory", "history", "message", "tools"]
        assert (limited.messages, limited.complete) == (3, False)
