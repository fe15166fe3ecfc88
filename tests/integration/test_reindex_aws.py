"""``memstack.transfer.reindex`` on the AWS backend: DynamoDB (moto) keeps the messages and their index
marks, and the new embedder's own OpenSearch index (on the test double) is filled beside the old one; recall
works with it, and a second run embeds nothing (what is marked for the model is skipped)."""

from __future__ import annotations

from pathlib import Path

from memstack import Memory
from memstack.adapters.hash_embed import HashEmbedder
from memstack.tokens import default_tokenizer
from memstack.transfer import Selection, reindex
from tests.backend_support import open_backend
from tests.contract.opensearch_support import opensearch_managed_index

VECTOR = {"semantic_recall": {"mode": "vector", "top_k": 1, "message_range": 0, "scope": "resource"}}


def test_given_messages_on_aws_when_reindexed_with_another_embedder_then_its_index_answers_recall(
    tmp_path: Path,
) -> None:
    with open_backend("aws-managed", tmp_path) as aws:
        for n, text in enumerate(["We sail to Bergen in June", "I bake sourdough bread", "A violin concert"]):
            aws.memory.save_messages(resource_id="alice", thread_id=f"t{n}", messages=[text])
        with opensearch_managed_index(128) as index:
            memory = Memory(
                store=aws.store,
                index=index,
                embedder=HashEmbedder(128),
                tokenizer=default_tokenizer(),
                options=VECTOR,
            )
            with memory:  # closes the store and the index too, as the factories do after it
                first = reindex(memory, Selection())
                again = reindex(memory, Selection(resource_id="alice"))
                hits = memory.recall(resource_id="alice", thread_id="new", query="sourdough bread").hits

    assert (first.messages, first.chunks, first.model_id) == (3, 3, "hash-128")
    assert (again.messages, again.chunks) == (3, 0)
    assert hits[0].thread_id == "t1"
