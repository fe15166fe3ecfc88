"""The DynamoDB request-unit rules the cost model counts with (benchmarks/dynamodb_units.py)."""

from __future__ import annotations

from benchmarks.dynamodb_units import item_bytes, request_units


def s(text: str) -> dict[str, str]:
    return {"S": text}


def test_given_an_item_then_its_size_is_names_plus_values() -> None:
    item = {"pk": s("r1"), "n": {"N": "12345"}, "ok": {"BOOL": True}, "m": {"M": {"a": s("xy")}}}
    # pk 2+2, n 1+(3+1), ok 2+1, m 1+(3+1+1+2)
    assert item_bytes(item) == 4 + 5 + 3 + 8


def test_given_a_consistent_query_over_5_kb_then_two_read_units_and_half_when_eventual() -> None:
    items = [{"pk": s("x" * 2_500)}, {"pk": s("y" * 2_500)}]
    assert request_units("Query", {"ConsistentRead": True}, {"Items": items}) == (2.0, 0.0)
    assert request_units("Query", {}, {"Items": items}) == (1.0, 0.0)


def test_given_a_batch_get_then_each_item_rounds_up_and_a_missing_key_costs_one() -> None:
    ask = {"RequestItems": {"t": {"Keys": [{}, {}, {}], "ConsistentRead": True}}}
    got = {"Responses": {"t": [{"pk": s("a")}, {"pk": s("b" * 5_000)}]}}
    assert request_units("BatchGetItem", ask, got) == (1 + 2 + 1, 0.0)


def test_given_a_transaction_then_each_item_costs_twice_per_started_kilobyte() -> None:
    items = [{"Put": {"Item": {"pk": s("z" * 1_500)}}}, {"Update": {}}, {"ConditionCheck": {}}]
    assert request_units("TransactWriteItems", {"TransactItems": items}, {}) == (0.0, 2 * 2 + 2 + 2)
