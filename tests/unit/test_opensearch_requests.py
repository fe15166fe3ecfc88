"""The OpenSearch adapter's exact requests, as the test double (tests/opensearch_double.py) receives them
from the real opensearch-py client: index creation, searches, bulk writes, deletes, error handling, SigV4."""

from __future__ import annotations

import hashlib
import logging
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memstack import deadline
from memstack.adapters.opensearch import OpenSearchIndex, index_body, make_client
from memstack.adapters.opensearch.client import describe
from memstack.adapters.opensearch.index import chunk_id
from memstack.errors import InvalidInput, Unavailable
from memstack.ports import IndexEntry
from tests.opensearch_double import OpenSearchDouble, Recorded

NAME = "memstack-hash-4-4"
ROOT = Path(__file__).resolve().parents[2]
T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)

EXPECTED_INDEX_BODY = {
    "settings": {
        "index": {"knn": True},
        "analysis": {
            "analyzer": {
                "memstack_english": {
                    "type": "custom",
                    "tokenizer": "standard",
                    "filter": ["memstack_possessive", "lowercase", "asciifolding", "porter_stem"],
                }
            },
            "filter": {"memstack_possessive": {"type": "stemmer", "language": "possessive_english"}},
        },
    },
    "mappings": {
        "dynamic": "strict",
        "dynamic_templates": [
            {
                "meta_strings": {
                    "path_match": "meta_s.*",
                    "mapping": {"type": "keyword", "ignore_above": 8191},
                }
            },
            {"meta_numbers": {"path_match": "meta_n.*", "mapping": {"type": "double"}}},
            {"meta_bools": {"path_match": "meta_b.*", "mapping": {"type": "boolean"}}},
        ],
        "properties": {
            "vector": {
                "type": "knn_vector",
                "dimension": 4,
                "method": {"name": "hnsw", "space_type": "cosinesimil", "engine": "lucene"},
            },
            "text": {"type": "text", "analyzer": "memstack_english"},
            "message_id": {"type": "keyword"},
            "thread_id": {"type": "keyword"},
            "resource_id": {"type": "keyword"},
            "role": {"type": "keyword"},
            "uid": {"type": "keyword"},
            "chunk": {"type": "integer"},
            "seq": {"type": "long"},
            "created_at": {"type": "date"},
            "meta_s": {"type": "object", "dynamic": True},
            "meta_n": {"type": "object", "dynamic": True},
            "meta_b": {"type": "object", "dynamic": True},
            "meta_null": {"type": "keyword"},
            "meta_paths": {"type": "keyword"},
        },
    },
}

SCOPE_AND_FILTER = [
    {"term": {"resource_id": "r1"}},
    {"term": {"thread_id": "t1"}},
    {"term": {"meta_s.tier": "pro"}},
    {"range": {"meta_n.age": {"gte": 18}}},
]
VECTOR_BODY = {
    "size": 14,
    "_source": ["message_id", "thread_id", "seq"],
    "query": {
        "knn": {
            "vector": {
                "vector": [1.0, 0.0, 0.0, 0.0],
                "k": 14,
                "filter": {"bool": {"filter": SCOPE_AND_FILTER}},
            }
        }
    },
}
KEYWORD_BODY = {
    "size": 14,
    "_source": ["message_id", "thread_id", "seq"],
    "query": {"bool": {"must": [{"match": {"text": {"query": "Paris museum"}}}], "filter": SCOPE_AND_FILTER}},
}


@pytest.fixture
def managed() -> Iterator[OpenSearchDouble]:
    with OpenSearchDouble("managed") as double:
        yield double


@pytest.fixture
def serverless() -> Iterator[OpenSearchDouble]:
    with OpenSearchDouble("serverless") as double:
        yield double


def open_index(double: OpenSearchDouble, service: str = "es", **options: Any) -> OpenSearchIndex:
    client = make_client(double.url, service="none", max_retries=0)
    return OpenSearchIndex(client, dimension=4, model_id="hash-4", service=service, **options)  # type: ignore[arg-type]


def entry(message_id: str, chunk: int = 0, **fields: Any) -> IndexEntry:
    values: dict[str, Any] = {
        "thread_id": "t1",
        "resource_id": "r1",
        "role": "user",
        "seq": 1,
        "created_at": T0,
        "text": f"note {message_id}",
        "vector": [1.0, 0.0, 0.0, 0.0],
        "metadata": {"tier": "pro"},
    }
    values.update(fields)
    return IndexEntry(message_id=message_id, chunk=chunk, **values)


def doc(message_id: str, chunk: int = 0, uid: str | None = None) -> dict[str, Any]:
    return {
        "uid": uid or chunk_id("r1", message_id, chunk),
        "resource_id": "r1",
        "thread_id": "t1",
        "message_id": message_id,
        "chunk": chunk,
        "role": "user",
        "seq": 1,
        "created_at": "2024-05-01T12:00:00+00:00",
        "text": f"note {message_id}\nMay 1 2024",
        "vector": [1.0, 0.0, 0.0, 0.0],
        "meta_s": {"tier": ["pro"]},
        "meta_paths": ["tier"],
    }


def calls(double: OpenSearchDouble) -> list[tuple[str, str]]:
    return [(r.method, r.path) for r in double.requests]


def last(double: OpenSearchDouble) -> Recorded:
    return double.requests[-1]


# start-up -------------------------------------------------------------------------------------------


def test_given_no_index_when_the_adapter_starts_then_it_creates_the_index_with_the_exact_mapping(
    managed: OpenSearchDouble,
) -> None:
    index = open_index(managed)

    assert index.name == NAME
    assert calls(managed) == [("HEAD", f"/{NAME}"), ("PUT", f"/{NAME}")]
    assert managed.requests[1].body == EXPECTED_INDEX_BODY


def test_given_an_existing_index_when_the_adapter_starts_then_it_only_checks_the_mapping(
    managed: OpenSearchDouble,
) -> None:
    open_index(managed)
    managed.clear_requests()

    open_index(managed)

    assert calls(managed) == [("HEAD", f"/{NAME}"), ("GET", f"/{NAME}/_mapping")]


def test_given_an_index_of_another_dimension_when_the_adapter_starts_then_invalid_input_names_both(
    managed: OpenSearchDouble,
) -> None:
    client = make_client(managed.url, service="none", max_retries=0)
    client.indices.create(index=NAME, body=index_body(8, "lucene"))

    with pytest.raises(InvalidInput) as err:
        open_index(managed)

    assert "8" in err.value.message and "4" in err.value.message
    assert err.value.field == "dimension"


def test_given_faiss_when_the_adapter_creates_the_index_then_the_engine_is_faiss(
    managed: OpenSearchDouble,
) -> None:
    open_index(managed, engine="faiss")

    assert managed.requests[1].body["mappings"]["properties"]["vector"]["method"]["engine"] == "faiss"


# search ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["managed", "serverless"])
def test_given_a_vector_query_when_searching_then_one_search_carries_scope_and_filter_inside_knn(
    mode: str,
) -> None:
    with OpenSearchDouble(mode) as double:  # type: ignore[arg-type]
        index = open_index(double, "es" if mode == "managed" else "aoss")
        double.clear_requests()

        index.search(
            "r1",
            top_k=3,
            vector=[1.0, 0.0, 0.0, 0.0],
            thread_id="t1",
            filter={"tier": "pro", "age": {"$gte": 18}},
        )

        assert calls(double) == [("POST", f"/{NAME}/_search")]
        assert last(double).body == VECTOR_BODY


def test_given_a_text_query_when_searching_then_one_bm25_match_is_sent_with_the_same_filter(
    managed: OpenSearchDouble,
) -> None:
    index = open_index(managed)
    managed.clear_requests()

    index.search(
        "r1", top_k=3, text="the Paris museum?", thread_id="t1", filter={"tier": "pro", "age": {"$gte": 18}}
    )

    assert calls(managed) == [("POST", f"/{NAME}/_search")]
    assert last(managed).body == KEYWORD_BODY


def test_given_both_retrievers_when_searching_then_exactly_one_msearch_carries_both_bodies(
    managed: OpenSearchDouble,
) -> None:
    index = open_index(managed)
    managed.clear_requests()

    results = index.search(
        "r1",
        top_k=3,
        vector=[1.0, 0.0, 0.0, 0.0],
        text="Paris museum",
        thread_id="t1",
        filter={"tier": "pro", "age": {"$gte": 18}},
    )

    assert calls(managed) == [("POST", "/_msearch")]
    assert last(managed).body == [{"index": NAME}, VECTOR_BODY, {"index": NAME}, KEYWORD_BODY]
    assert results.vector == [] and results.keyword == []


def test_given_chunks_of_few_messages_when_top_k_is_not_reached_then_the_list_is_fetched_again_larger(
    managed: OpenSearchDouble,
) -> None:
    index = open_index(managed)
    index.upsert([entry("many", chunk=c) for c in range(12)] + [entry("other", vector=[0.5, 0.5, 0.0, 0.0])])
    managed.clear_requests()

    hits = index.search("r1", top_k=2, vector=[1.0, 0.0, 0.0, 0.0]).vector

    assert [h.message_id for h in hits or []] == ["many", "other"]
    assert [r.body["size"] for r in managed.requests] == [12, 48]
    assert managed.requests[1].body["query"]["knn"]["vector"]["k"] == 48


def test_given_a_query_without_words_when_searching_by_keyword_then_nothing_is_sent(
    managed: OpenSearchDouble,
) -> None:
    index = open_index(managed)
    managed.clear_requests()

    assert index.search("r1", top_k=3, text="?!").keyword == []
    assert managed.requests == []


# writes ---------------------------------------------------------------------------------------------


def test_given_es_when_upserting_then_one_bulk_with_ids_then_a_delete_of_the_stale_chunks(
    managed: OpenSearchDouble,
) -> None:
    index = open_index(managed, refresh=True)
    managed.clear_requests()

    index.upsert([entry("m1"), entry("m1", chunk=1), entry("m2")])

    assert calls(managed) == [("POST", "/_bulk"), ("POST", f"/{NAME}/_delete_by_query")]
    bulk, stale = managed.requests
    assert bulk.params == {"refresh": "wait_for"}
    assert bulk.body == [
        {"index": {"_index": NAME, "_id": chunk_id("r1", "m1", 0)}},
        doc("m1"),
        {"index": {"_index": NAME, "_id": chunk_id("r1", "m1", 1)}},
        doc("m1", 1),
        {"index": {"_index": NAME, "_id": chunk_id("r1", "m2", 0)}},
        doc("m2"),
    ]
    assert stale.params == {"conflicts": "proceed", "refresh": "true"}
    assert stale.body == {
        "query": {
            "bool": {
                "filter": [{"term": {"resource_id": "r1"}}, {"terms": {"message_id": ["m1", "m2"]}}],
                "must_not": [
                    {
                        "ids": {
                            "values": [
                                chunk_id("r1", "m1", 0),
                                chunk_id("r1", "m1", 1),
                                chunk_id("r1", "m2", 0),
                            ]
                        }
                    }
                ],
            }
        }
    }


def test_given_aoss_when_upserting_then_old_ids_are_found_new_chunks_indexed_without_ids_and_old_ids_deleted(
    serverless: OpenSearchDouble,
) -> None:
    index = open_index(serverless, "aoss")
    index.upsert([entry("m1")])
    (old_id,) = serverless.documents(NAME)
    serverless.clear_requests()

    index.upsert([entry("m1")])

    assert calls(serverless) == [("POST", f"/{NAME}/_search"), ("POST", "/_bulk"), ("POST", "/_bulk")]
    lookup, write, delete = serverless.requests
    assert lookup.body == {
        "size": 1000,
        "_source": False,
        "query": {"bool": {"filter": [{"term": {"resource_id": "r1"}}, {"terms": {"message_id": ["m1"]}}]}},
        "sort": [{"uid": "asc"}],
    }
    uid = write.body[1]["uid"]
    assert write.params == {} and write.body == [{"index": {"_index": NAME}}, doc("m1", uid=uid)]
    assert len(uid) == 32 and uid != chunk_id("r1", "m1", 0)
    assert delete.body == [{"delete": {"_index": NAME, "_id": old_id}}]
    assert len(serverless.documents(NAME)) == 1


@pytest.mark.parametrize(
    ("action", "query"),
    [
        (
            lambda ix: ix.delete_messages("r1", ["m2", "m1"]),
            {"bool": {"filter": [{"term": {"resource_id": "r1"}}, {"terms": {"message_id": ["m1", "m2"]}}]}},
        ),
        (
            lambda ix: ix.delete_thread("r1", "t1"),
            {"bool": {"filter": [{"term": {"resource_id": "r1"}}, {"term": {"thread_id": "t1"}}]}},
        ),
    ],
    ids=["messages", "thread"],
)
def test_given_es_when_deleting_then_one_delete_by_query(
    managed: OpenSearchDouble, action: Any, query: Any
) -> None:
    index = open_index(managed)
    index.upsert([entry("m1"), entry("m2")])
    managed.clear_requests()

    action(index)

    assert calls(managed) == [("POST", f"/{NAME}/_delete_by_query")]
    assert last(managed).body == {"query": query}
    assert managed.documents(NAME) == {}


@pytest.mark.parametrize(
    ("action", "query"),
    [
        (
            lambda ix: ix.delete_messages("r1", ["m2", "m1"]),
            {"bool": {"filter": [{"term": {"resource_id": "r1"}}, {"terms": {"message_id": ["m1", "m2"]}}]}},
        ),
        (
            lambda ix: ix.delete_thread("r1", "t1"),
            {"bool": {"filter": [{"term": {"resource_id": "r1"}}, {"term": {"thread_id": "t1"}}]}},
        ),
    ],
    ids=["messages", "thread"],
)
def test_given_aoss_when_deleting_then_ids_are_searched_then_deleted_in_one_bulk(
    serverless: OpenSearchDouble, action: Any, query: Any
) -> None:
    index = open_index(serverless, "aoss")
    index.upsert([entry("m1"), entry("m2")])
    ids = sorted(serverless.documents(NAME))
    serverless.clear_requests()

    action(index)

    assert calls(serverless) == [("POST", f"/{NAME}/_search"), ("POST", "/_bulk")]
    lookup, delete = serverless.requests
    assert lookup.body == {"size": 1000, "_source": False, "query": query, "sort": [{"uid": "asc"}]}
    assert sorted(a["delete"]["_id"] for a in delete.body) == ids
    assert serverless.documents(NAME) == {}


RESOURCE_QUERY = {"bool": {"filter": [{"term": {"resource_id": "r1"}}]}}


def test_given_es_when_a_resource_is_deleted_then_one_delete_by_query_whose_count_is_returned(
    managed: OpenSearchDouble,
) -> None:
    index = open_index(managed)
    index.upsert([entry("m1"), entry("m2", thread_id="t2"), entry("m1", resource_id="r2")])
    managed.clear_requests()

    assert index.delete_resource("r1") == 2

    assert calls(managed) == [("POST", f"/{NAME}/_delete_by_query")]
    assert last(managed).body == {"query": RESOURCE_QUERY}
    assert last(managed).params == {"conflicts": "proceed"}
    assert [d["resource_id"] for d in managed.documents(NAME).values()] == ["r2"]


def test_given_aoss_when_a_resource_is_deleted_then_ids_are_searched_and_bulk_deleted_until_none_is_found(
    serverless: OpenSearchDouble,
) -> None:
    index = open_index(serverless, "aoss")
    index.upsert([entry("m1"), entry("m2", thread_id="t2"), entry("m1", resource_id="r2")])
    ids = sorted(i for i, d in serverless.documents(NAME).items() if d["resource_id"] == "r1")
    serverless.clear_requests()

    assert index.delete_resource("r1") == 2

    assert calls(serverless) == [
        ("POST", f"/{NAME}/_search"),
        ("POST", "/_bulk"),
        ("POST", f"/{NAME}/_search"),
    ]
    lookup, delete, check = serverless.requests
    assert (
        lookup.body
        == check.body
        == {"size": 1000, "_source": False, "query": RESOURCE_QUERY, "sort": [{"uid": "asc"}]}
    )
    assert sorted(a["delete"]["_id"] for a in delete.body) == ids
    assert [d["resource_id"] for d in serverless.documents(NAME).values()] == ["r2"]


def test_given_aoss_search_still_showing_deleted_ids_when_a_resource_is_deleted_then_it_stops_and_counts_once(
    serverless: OpenSearchDouble, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = open_index(serverless, "aoss")
    index.upsert([entry("m1"), entry("m2")])
    found = index._find_ids
    seen: list[list[str]] = []

    def lagging(query: Any) -> list[str]:  # Serverless shows deletes after a delay: the ids come back once
        ids = found(query) or (seen[-1] if seen else [])
        seen.append(ids)
        return ids

    monkeypatch.setattr(index, "_find_ids", lagging)
    serverless.clear_requests()

    assert index.delete_resource("r1") == 2

    assert [r.path for r in serverless.requests].count("/_bulk") == 2  # the second answers 404s and ends it
    assert serverless.documents(NAME) == {}


def test_given_aoss_when_the_double_gets_a_client_id_then_it_refuses_it_like_serverless(
    serverless: OpenSearchDouble,
) -> None:
    client = make_client(serverless.url, service="none", max_retries=0)
    open_index(serverless, "aoss")

    answer = client.bulk(body=[{"index": {"_index": NAME, "_id": "x"}}, doc("m1")])

    assert answer["errors"] is True
    assert answer["items"][0]["index"]["error"]["type"] == "illegal_argument_exception"


# failures -------------------------------------------------------------------------------------------


def test_given_a_bulk_with_throttled_items_when_the_retry_succeeds_then_only_the_failed_items_are_resent(
    managed: OpenSearchDouble,
) -> None:
    index = open_index(managed, bulk_retry_delays=(0.0, 0.0))
    managed.clear_requests()
    managed.fail_next_bulk_items(every=2, times=1)

    index.upsert([entry(f"m{i}") for i in range(4)])

    bulks = [r for r in managed.requests if r.path == "/_bulk"]
    assert [len(b.body) // 2 for b in bulks] == [4, 2]
    assert [a["index"]["_id"] for a in bulks[1].body[0::2]] == [
        chunk_id("r1", "m0", 0),
        chunk_id("r1", "m2", 0),
    ]
    assert len(managed.documents(NAME)) == 4


@pytest.mark.parametrize("mode", ["managed", "serverless"])
def test_given_a_bulk_whose_items_keep_failing_when_upserting_then_unavailable_names_the_count(
    mode: str,
) -> None:
    with OpenSearchDouble(mode) as double:  # type: ignore[arg-type]
        index = open_index(double, "es" if mode == "managed" else "aoss", bulk_retry_delays=(0.0, 0.0))
        double.fail_next_bulk_items(every=1, times=3)

        with pytest.raises(Unavailable) as err:
            index.upsert([entry(f"m{i}") for i in range(3)])

        assert "3 of 3" in err.value.message
        assert sum(r.path == "/_bulk" for r in double.requests) == 3


def test_given_a_503_when_searching_then_unavailable(managed: OpenSearchDouble) -> None:
    index = open_index(managed)
    managed.fail_next_requests(503)

    with pytest.raises(Unavailable) as err:
        index.search("r1", top_k=3, vector=[1.0, 0.0, 0.0, 0.0])

    assert "503" in err.value.message


def test_given_a_503_on_bulk_when_upserting_then_unavailable(managed: OpenSearchDouble) -> None:
    index = open_index(managed)
    managed.fail_next_requests(503)

    with pytest.raises(Unavailable):
        index.upsert([entry("m1")])


def test_given_a_429_when_searching_both_then_unavailable(managed: OpenSearchDouble) -> None:
    index = open_index(managed)
    managed.fail_next_requests(429, error_type="es_rejected_execution_exception")

    with pytest.raises(Unavailable):
        index.search("r1", top_k=3, vector=[1.0, 0.0, 0.0, 0.0], text="hello")


def test_given_a_400_when_searching_then_invalid_input_names_the_error(managed: OpenSearchDouble) -> None:
    index = open_index(managed)
    managed.fail_next_requests(400, error_type="parsing_exception")

    with pytest.raises(InvalidInput) as err:
        index.search("r1", top_k=3, text="hello")

    assert "parsing_exception" in err.value.message


def test_given_no_server_when_starting_then_unavailable() -> None:
    with OpenSearchDouble() as double:
        url = double.url
    client = make_client(url, service="none", max_retries=0, timeout=1)

    with pytest.raises(Unavailable):
        OpenSearchIndex(client, dimension=4, model_id="hash-4")


# auth -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("service", ["aoss", "es"])
def test_given_sigv4_when_a_request_is_sent_then_it_is_signed_for_the_service(
    managed: OpenSearchDouble, service: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    client = make_client(managed.url, service=service, region="eu-west-1", max_retries=0)  # type: ignore[arg-type]

    OpenSearchIndex(client, dimension=4, model_id="hash-4", service=service)  # type: ignore[arg-type]

    for request in managed.requests:
        authorization = request.headers.get("Authorization", "")
        assert authorization.startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
        assert f"/eu-west-1/{service}/aws4_request" in authorization
        assert "X-Amz-Date" in request.headers


def test_given_sigv4_when_requests_with_bodies_are_sent_then_each_signature_covers_the_bytes_received(
    serverless: OpenSearchDouble, monkeypatch: pytest.MonkeyPatch
) -> None:
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.delenv("AWS_SECURITY_TOKEN", raising=False)  # botocore reads it before AWS_SESSION_TOKEN
    monkeypatch.setenv("AWS_SESSION_TOKEN", "token")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    client = make_client(serverless.url, service="aoss", region="eu-west-1", max_retries=0)
    index = OpenSearchIndex(client, dimension=4, model_id="hash-4", service="aoss")
    index.search("r1", top_k=3, vector=[1.0, 0.0, 0.0, 0.0], text="garden water")

    signer = SigV4Auth(Credentials("AKIDEXAMPLE", "secret", "token"), "aoss", "eu-west-1")
    with_bodies = [r for r in serverless.requests if r.raw]
    assert with_bodies, "no request with a body was sent"
    for request in serverless.requests:
        headers = {k.lower(): v for k, v in request.headers.items()}
        assert headers["x-amz-content-sha256"] == hashlib.sha256(request.raw).hexdigest()
        assert headers["x-amz-security-token"] == "token"
        check = AWSRequest(
            method=request.method,
            url=serverless.url.rstrip("/") + request.target,
            data=request.raw,
            headers={
                k: headers[k] for k in ("host", "x-amz-date", "x-amz-content-sha256", "x-amz-security-token")
            },
        )
        check.context["timestamp"] = headers["x-amz-date"]
        expected = signer.signature(signer.string_to_sign(check, signer.canonical_request(check)), check)
        assert headers["authorization"].endswith(f"Signature={expected}"), (
            f"{request.method} {request.target}"
        )


def test_given_basic_auth_when_a_request_is_sent_then_it_carries_the_user(managed: OpenSearchDouble) -> None:
    client = make_client(managed.url, service="none", username="admin", password="pw", max_retries=0)

    client.indices.exists(index=NAME)

    headers = {k.lower(): v for k, v in managed.requests[0].headers.items()}  # HTTP names: any case
    assert headers["authorization"] == "Basic YWRtaW46cHc="


def test_given_a_bad_service_when_making_a_client_then_invalid_input() -> None:
    with pytest.raises(InvalidInput):
        make_client("http://localhost:9200", service="nmslib")  # type: ignore[arg-type]


# timeouts and retries -------------------------------------------------------------------------------


def test_given_a_search_slower_than_its_timeout_when_searching_then_it_fails_once_naming_the_timeout(
    managed: OpenSearchDouble,
) -> None:
    client = make_client(managed.url, service="none", max_retries=2)
    index = OpenSearchIndex(client, dimension=4, model_id="hash-4", search_timeout=0.2)
    managed.clear_requests()
    managed.delay_next_requests(1.0, count=1)

    with pytest.raises(Unavailable) as err:
        index.search("r1", top_k=3, vector=[1.0, 0.0, 0.0, 0.0])

    assert "0.2 s" in err.value.message and "timeout" in err.value.message and NAME in err.value.message
    assert calls(managed) == [("POST", f"/{NAME}/_search")]  # received once: a timeout is never retried
    assert index.search("r1", top_k=3, vector=[1.0, 0.0, 0.0, 0.0]).vector == []  # the next one works


def test_given_a_bulk_slower_than_the_write_timeout_when_upserting_then_it_fails_once_naming_the_timeout(
    managed: OpenSearchDouble,
) -> None:
    client = make_client(managed.url, service="none", max_retries=2)
    index = OpenSearchIndex(client, dimension=4, model_id="hash-4", write_timeout=0.2)
    managed.clear_requests()
    managed.delay_next_requests(1.0, count=1)

    with pytest.raises(Unavailable) as err:
        index.upsert([entry("m1")])

    assert "bulk write" in err.value.message and "0.2 s" in err.value.message
    assert calls(managed) == [("POST", "/_bulk")]


def test_given_default_timeouts_when_searching_and_writing_then_10_and_30_seconds_are_passed(
    managed: OpenSearchDouble, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = open_index(managed)
    seen: list[tuple[str, Any]] = []
    for method in ("search", "msearch", "bulk", "delete_by_query"):
        original = getattr(index._client, method)

        def spy(*args: Any, _name: str = method, _original: Any = original, **kwargs: Any) -> Any:
            seen.append((_name, kwargs.get("request_timeout")))
            return _original(*args, **kwargs)

        monkeypatch.setattr(index._client, method, spy)

    index.upsert([entry("m1")])
    index.search("r1", top_k=3, vector=[1.0, 0.0, 0.0, 0.0])
    index.search("r1", top_k=3, vector=[1.0, 0.0, 0.0, 0.0], text="note")

    assert seen == [("bulk", 30.0), ("delete_by_query", 30.0), ("search", 10.0), ("msearch", 10.0)]


def test_given_a_turn_deadline_sooner_than_the_search_timeout_when_searching_then_the_time_left_is_passed(
    managed: OpenSearchDouble, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = open_index(managed)
    seen: list[tuple[str, Any]] = []
    for method in ("search", "msearch"):
        original = getattr(index._client, method)

        def spy(*args: Any, _name: str = method, _original: Any = original, **kwargs: Any) -> Any:
            seen.append((_name, kwargs.get("request_timeout")))
            return _original(*args, **kwargs)

        monkeypatch.setattr(index._client, method, spy)

    with deadline.within(2.0):
        index.search("r1", top_k=3, vector=[1.0, 0.0, 0.0, 0.0])
        index.search("r1", top_k=3, vector=[1.0, 0.0, 0.0, 0.0], text="note")
    with deadline.within(60.0):
        index.search("r1", top_k=3, vector=[1.0, 0.0, 0.0, 0.0])

    assert [name for name, _ in seen] == ["search", "msearch", "search"]
    assert all(0.0 < t <= 2.0 for _, t in seen[:2]), seen
    assert seen[2][1] == 10.0  # a later deadline never lengthens search_timeout


def test_given_a_slow_cluster_under_a_turn_deadline_when_searching_then_it_fails_at_the_deadline(
    managed: OpenSearchDouble,
) -> None:
    client = make_client(managed.url, service="none", max_retries=2)
    index = OpenSearchIndex(client, dimension=4, model_id="hash-4")  # search_timeout 10 s
    managed.clear_requests()
    managed.delay_next_requests(2.0, count=1)

    started = time.monotonic()
    with deadline.within(0.3), pytest.raises(Unavailable) as err:
        index.search("r1", top_k=3, vector=[1.0, 0.0, 0.0, 0.0])

    assert time.monotonic() - started < 1.5
    assert "timeout" in err.value.message and NAME in err.value.message
    assert calls(managed) == [("POST", f"/{NAME}/_search")]


def test_given_a_passed_turn_deadline_when_searching_then_nothing_is_sent(managed: OpenSearchDouble) -> None:
    index = open_index(managed)
    managed.clear_requests()

    with deadline.within(0.0), pytest.raises(Unavailable) as err:
        index.search("r1", top_k=3, vector=[1.0, 0.0, 0.0, 0.0])

    assert "deadline" in err.value.message and NAME in err.value.message
    assert calls(managed) == []


def test_given_a_503_when_the_client_may_retry_then_the_request_is_retried(managed: OpenSearchDouble) -> None:
    client = make_client(managed.url, service="none", max_retries=2)
    index = OpenSearchIndex(client, dimension=4, model_id="hash-4")
    managed.clear_requests()
    managed.fail_next_requests(503)

    assert index.search("r1", top_k=3, vector=[1.0, 0.0, 0.0, 0.0]).vector == []
    assert calls(managed) == [("POST", f"/{NAME}/_search")] * 2


@pytest.mark.parametrize("bad", [0, -1.0, float("inf"), True, "10"])
def test_given_a_bad_timeout_when_opening_then_invalid_input(managed: OpenSearchDouble, bad: Any) -> None:
    with pytest.raises(InvalidInput) as err:
        open_index(managed, search_timeout=bad)

    assert err.value.field == "search_timeout"


# engine and space type of an existing index ---------------------------------------------------------


def test_given_an_index_on_another_engine_when_the_adapter_starts_then_it_warns_and_reports_the_real_one(
    managed: OpenSearchDouble, caplog: pytest.LogCaptureFixture
) -> None:
    make_client(managed.url, service="none").indices.create(index=NAME, body=index_body(4, "lucene"))

    with caplog.at_level(logging.WARNING, logger="memstack"):
        index = open_index(managed, engine="faiss")

    assert index.engine == "lucene"
    (record,) = [r for r in caplog.records if r.name.startswith("memstack") and r.levelno >= logging.WARNING]
    assert "lucene" in record.getMessage() and "faiss" in record.getMessage() and NAME in record.getMessage()
    index.upsert([entry("m1")])  # and it works as it is
    assert [h.message_id for h in index.search("r1", top_k=3, vector=[1.0, 0.0, 0.0, 0.0]).vector or []] == [
        "m1"
    ]


def test_given_an_index_on_the_same_engine_when_the_adapter_starts_then_nothing_is_logged(
    managed: OpenSearchDouble, caplog: pytest.LogCaptureFixture
) -> None:
    open_index(managed, engine="faiss")

    with caplog.at_level(logging.WARNING, logger="memstack"):
        index = open_index(managed, engine="faiss")

    assert index.engine == "faiss"
    assert not [r for r in caplog.records if r.name.startswith("memstack") and r.levelno >= logging.WARNING]


def test_given_an_index_with_another_space_type_when_the_adapter_starts_then_invalid_input_names_both(
    managed: OpenSearchDouble,
) -> None:
    body = index_body(4, "lucene")
    body["mappings"]["properties"]["vector"]["method"]["space_type"] = "l2"
    make_client(managed.url, service="none").indices.create(index=NAME, body=body)

    with pytest.raises(InvalidInput) as err:
        open_index(managed)

    assert "'l2'" in err.value.message and "'cosinesimil'" in err.value.message and NAME in err.value.message


def test_given_an_index_on_nmslib_when_the_adapter_starts_then_invalid_input_names_both_engines(
    managed: OpenSearchDouble,
) -> None:
    open_index(managed)
    # The double (like current OpenSearch) refuses to create nmslib indexes; an old one is simulated.
    managed._state.indices[NAME].mappings["properties"]["vector"]["method"]["engine"] = "nmslib"

    with pytest.raises(InvalidInput) as err:
        open_index(managed)

    assert "'nmslib'" in err.value.message and "'lucene'" in err.value.message
    assert err.value.field == "engine"


# logging and error messages -------------------------------------------------------------------------


def test_given_no_logging_configured_when_a_request_fails_or_times_out_then_nothing_reaches_stderr() -> None:
    """Neither opensearch-py's warnings (its logger gets a NullHandler from make_client, even if the library
    did not add one) nor the double's server thread (a client that hung up) print tracebacks."""
    script = """
import logging, time
import opensearchpy
logging.getLogger("opensearch").handlers.clear()  # as with a library version that adds no NullHandler
from memstack.adapters.opensearch import OpenSearchIndex, make_client
from memstack.errors import Unavailable
from tests.opensearch_double import OpenSearchDouble

with OpenSearchDouble() as double:
    index = OpenSearchIndex(make_client(double.url, service="none"), dimension=4, model_id="hash-4",
                            search_timeout=0.2)
    double.delay_next_requests(0.4, count=1)
    double.fail_next_requests(500, count=2)
    for _ in range(2):
        try:
            index.search("r1", top_k=3, vector=[1.0, 0.0, 0.0, 0.0])
        except Unavailable as err:
            print(err.message)
    time.sleep(0.5)  # the delayed answer is written to a closed connection
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=ROOT, check=False
    )

    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert "within 0.2 s" in done.stdout and "(500 unavailable)" in done.stdout


def test_given_a_translated_error_when_raised_then_the_adapter_logs_no_warning_with_a_traceback(
    managed: OpenSearchDouble, caplog: pytest.LogCaptureFixture
) -> None:
    index = open_index(managed)
    managed.fail_next_requests(503)

    with caplog.at_level(logging.DEBUG, logger="memstack"), pytest.raises(Unavailable):
        index.search("r1", top_k=3, vector=[1.0, 0.0, 0.0, 0.0])

    ours = [r for r in caplog.records if r.name.startswith("memstack")]
    assert not [r for r in ours if r.levelno >= logging.WARNING or r.exc_info]
    assert any(r.levelno == logging.DEBUG and "503" in r.getMessage() for r in ours)


def test_given_es_against_a_serverless_collection_when_upserting_then_the_error_names_index_and_reason(
    serverless: OpenSearchDouble,
) -> None:
    index = open_index(serverless, "es")

    with pytest.raises(Unavailable) as err:
        index.upsert([entry("m1", text="private words of the user")])

    message = err.value.message
    assert message.startswith(
        f"1 of 1 OpenSearch bulk actions on index {NAME} failed (illegal_argument_exception"
    )
    assert "Document ID is not supported in create/index operation request" in message
    assert "service 'aoss'" in message
    assert "private" not in message


def test_given_a_long_reason_with_a_value_preview_when_described_then_it_is_short_and_has_no_document_text() -> (
    None
):
    item = {
        "status": 400,
        "error": {
            "type": "mapper_parsing_exception",
            "reason": "failed to parse field [text] "
            + "x" * 400
            + ". Preview of field's value: 'secret text'",
        },
    }

    error_type, reason = describe(item, limit=200)
    _, previewed = describe(
        {"error": {"type": "t", "reason": "bad [text]. Preview of field's value: 'secret'"}}
    )

    assert error_type == "mapper_parsing_exception"
    assert len(reason) == 200 and reason.endswith("…") and "secret" not in reason
    assert previewed == "bad [text]"
    assert describe({"index": NAME, "cause": {"type": "version_conflict", "reason": "conflict"}}) == (
        "version_conflict",
        "conflict",
    )


# the double with large messages ----------------------------------------------------------------------


def test_given_three_600_kb_messages_when_searching_the_double_then_results_are_right(
    managed: OpenSearchDouble,
) -> None:
    """3 messages × 37 chunks of 16,384 characters (what a 600 KB assistant message becomes): searches on the
    double analyse nothing again, so this stays fast (it took ~20 s per search before)."""
    vocabulary = [f"w{n:04d}x" for n in range(3000)]
    index = open_index(managed, refresh=True)
    for m in range(3):
        words = " ".join(vocabulary[(m * 7919 + i * 31) % len(vocabulary)] for i in range(2000))
        text = (words + " ") * 8  # ~16 KB per chunk
        chunks = [text[:16_384] for _ in range(37)]
        chunks[20] = chunks[20][:-40] + f" needle{m} marker"
        index.upsert(
            [
                entry(f"m{m}", chunk=c, text=t, vector=[1.0, float(m), float(c % 3), 0.5])
                for c, t in enumerate(chunks)
            ]
        )
    assert len(managed.documents(NAME)) == 111

    for m in range(3):
        results = index.search("r1", top_k=2, text=f"needle{m}", vector=[1.0, float(m), 2.0, 0.5])
        assert [h.message_id for h in results.keyword or []] == [f"m{m}"]
        assert (results.vector or [])[0].message_id == f"m{m}"
    common = index.search("r1", top_k=3, text=f"{vocabulary[0]} marker").keyword or []
    assert sorted(h.message_id for h in common) == ["m0", "m1", "m2"]


def test_given_deletes_and_rewrites_when_searching_the_double_then_bm25_equals_a_fresh_index() -> None:
    texts = {"a": "red apple pie", "b": "green apple", "c": "apple apple tart", "d": "blue sky"}
    with OpenSearchDouble() as churned, OpenSearchDouble() as fresh:
        index = open_index(churned, refresh=True)
        index.upsert([entry(m, text="temporary apple words " * 3) for m in texts])
        index.upsert([entry(m, text=t) for m, t in texts.items()])
        index.delete_messages("r1", ["c"])
        clean = open_index(fresh, refresh=True)
        clean.upsert([entry(m, text=t) for m, t in texts.items() if m != "c"])

        got = index.search("r1", top_k=5, text="apple pie").keyword
        want = clean.search("r1", top_k=5, text="apple pie").keyword

    assert got == want and [h.message_id for h in got or []] == ["a", "b"]


def test_given_a_mapping_that_names_no_method_when_checked_then_nothing_is_known() -> None:
    from memstack.adapters.opensearch.schema import stored_method

    bare = {NAME: {"mappings": {"properties": {"vector": {"type": "knn_vector", "dimension": 4}}}}}
    field_level = {NAME: {"mappings": {"properties": {"vector": {"type": "knn_vector", "space_type": "l2"}}}}}

    assert stored_method(bare, NAME) == {}
    assert stored_method(field_level, NAME) == {"space_type": "l2"}
    assert stored_method(index_body(4, "faiss"), "mappings-missing") == {}


def test_given_other_tenants_when_searching_keywords_on_opensearch_then_statistics_are_the_shards_not_the_resources(
    managed: OpenSearchDouble,
) -> None:
    """Pins the limit ADR 0006 documents: Lucene's BM25 takes its statistics (document count, document
    frequencies, average length) from the whole shard, and a ``filter`` clause restricts matches, not
    statistics. The request scopes matches to the resource (``filter``), sends no routing and no
    ``search_type``: neither would make the statistics the resource's (a routed shard still holds other
    resources; ``dfs_query_then_fetch`` spans every shard). So one resource's keyword scores move with what
    another stored, while the SQLite index's do not (tests/contract/test_search_index.py)."""
    index = open_index(managed, refresh=True)
    mine = [entry("m1", text="museum trip in Paris"), entry("m2", text="a quiet museum day")]
    index.upsert(mine)
    alone = index.search("r1", top_k=5, text="Paris museum").keyword or []
    index.upsert([entry(f"o{i}", resource_id="r2", text="museum museum shop") for i in range(20)])
    managed.requests.clear()

    crowded = index.search("r1", top_k=5, text="Paris museum").keyword or []

    assert [h.message_id for h in alone] == [h.message_id for h in crowded] == ["m1", "m2"]
    assert [round(h.score, 6) for h in alone] != [round(h.score, 6) for h in crowded]
    searches = [r for r in managed.requests if r.path.endswith("/_search")]
    keyword = [r for r in searches if "match" in str(r.body)]
    assert keyword and all("routing" not in r.params and "search_type" not in r.params for r in searches)
    assert {"term": {"resource_id": "r1"}} in keyword[0].body["query"]["bool"]["filter"]
