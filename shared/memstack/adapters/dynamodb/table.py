"""``create_table``: the table (and bucket) for development, tests and local endpoints.

Production tables come from CDK (``infra/``) with the same key schema, indexes and TTL attribute.
"""

from __future__ import annotations

import logging

from memstack.adapters.dynamodb.clients import create_client, pynamodb_client
from memstack.adapters.dynamodb.errors import error_code, translated
from memstack.adapters.dynamodb.items import item_model

log = logging.getLogger(__name__)

TTL_ATTRIBUTE = "expires_at"
"""The attribute DynamoDB's TTL reads (epoch seconds), set on messages when a TTL is configured."""


def create_table(
    *,
    table_name: str,
    region: str | None = None,
    endpoint_url: str | None = None,
    bucket: str | None = None,
    s3_endpoint_url: str | None = None,
) -> bool:
    """Create the table if it is missing (on-demand, key schema ``pk``/``sk``, indexes ``by_created`` and
    ``by_updated`` (projection ALL), ``by_pending`` (keys only) and ``by_unindexed`` (keys and
    ``thread_id``), a NEW_AND_OLD_IMAGES stream for the indexer, TTL on ``expires_at``) and, if ``bucket``
    is given, the bucket. Idempotent: an existing table is left as it is (a table made before
    ``by_pending`` or ``by_unindexed`` existed must be recreated).

    Returns:
        ``True`` if the table was created, ``False`` if it existed.

    Raises:
        Unavailable: DynamoDB or S3 cannot be reached or refuse the request.
    """
    model = item_model(table_name, region=region, host=endpoint_url)
    created = False
    with translated("create table"):
        pynamodb_client(model._get_connection().connection)
        if not model.exists():
            try:
                model.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
                created = True
            except Exception as exc:
                if error_code(exc) != "ResourceInUseException":  # created meanwhile by someone else
                    raise
        if created:
            model._get_connection().update_time_to_live(TTL_ATTRIBUTE)
        model._get_connection().connection.client.close()
    if bucket:
        _create_bucket(bucket, region=region, endpoint_url=s3_endpoint_url)
    log.info("table ready", extra={"table": table_name, "table_created": created})
    return created


def _create_bucket(bucket: str, *, region: str | None, endpoint_url: str | None) -> None:
    from botocore.config import Config

    config = Config(s3={"addressing_style": "path"}) if endpoint_url else None
    with translated("create bucket"):
        client = create_client("s3", region_name=region, endpoint_url=endpoint_url, config=config)
        try:
            effective = region or client.meta.region_name
            if effective and effective != "us-east-1":
                client.create_bucket(
                    Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": effective}
                )
            else:
                client.create_bucket(Bucket=bucket)
        except Exception as exc:
            if error_code(exc) not in {"BucketAlreadyOwnedByYou", "BucketAlreadyExists"}:
                raise
        finally:
            client.close()
