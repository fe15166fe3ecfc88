"""Message bodies too large for a DynamoDB item, kept in S3 (DynamoDB items are limited to 400 KB).

Objects are content-addressed: ``messages/{sha256(resource_id)}/{sha256(thread_id)}/{sha256(message_id)}/
{sha256(body)}.json`` (ids are per resource, so the resource is part of the key). Writing one before the
transaction that points at it is harmless when the transaction is retried or lost (the same content gets
the same key); reading one checks its size and SHA-256, so a body comes back byte-identical or not at all.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from memstack.adapters.dynamodb.clients import create_client
from memstack.adapters.dynamodb.errors import translated
from memstack.errors import Unavailable

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class BodyRef:
    """Where a body lives in S3, with its size in bytes and SHA-256 (hex)."""

    key: str
    size: int
    sha256: str


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class BodyStore:
    """Message bodies in one S3 bucket.

    Args:
        bucket: the bucket name.
        region: AWS region (``None``: botocore's default resolution).
        endpoint_url: a local endpoint (moto, LocalStack); path-style addressing is used with it.
    """

    def __init__(self, bucket: str, *, region: str | None, endpoint_url: str | None) -> None:
        from botocore.config import Config

        # Bodies are up to ~4 MB: 10 s to answer, 3 attempts in all, so a dead endpoint fails in ~36 s.
        config = Config(
            connect_timeout=2,
            read_timeout=10,
            retries={"mode": "standard", "max_attempts": 3},
            s3={"addressing_style": "path"} if endpoint_url else None,
            max_pool_connections=32,
        )
        self.bucket = bucket
        self._settings: dict[str, Any] = {
            "region_name": region,
            "endpoint_url": endpoint_url,
            "config": config,
        }
        self._made: Any = None
        self._lock = threading.Lock()

    @property
    def _client(self) -> Any:
        """The S3 client, created on first use: only messages over the inline limit have a body here, so
        most functions never need it, and creating it costs a cold start ~25 ms of CPU.

        Raises:
            Unavailable: the client cannot be created.
        """
        if self._made is None:
            with self._lock, translated("connect to S3"):
                if self._made is None:
                    self._made = create_client("s3", **self._settings)
        return self._made

    @staticmethod
    def thread_prefix(resource_id: str, thread_id: str) -> str:
        """``messages/{sha256(resource_id)}/{sha256(thread_id)}/``: the key prefix of every body of the
        thread (and of no other thread: the segments are fixed-width digests, ended by ``/``)."""
        resource_hash, thread_hash = (
            _sha(i.encode("utf-8", "surrogatepass")) for i in (resource_id, thread_id)
        )
        return f"messages/{resource_hash}/{thread_hash}/"

    @staticmethod
    def ref_for(resource_id: str, thread_id: str, message_id: str, data: bytes) -> BodyRef:
        """The content-addressed reference of a body:
        ``messages/{sha256(resource_id)}/{sha256(thread_id)}/{sha256(message_id)}/{sha256(body)}.json``.

        Ids are hashed, never spliced into the key: ids may hold ``/``, ``..`` or any character, and two
        different (resource, thread, message) triples must never share an object (a delete of one would
        destroy the other; thread and message ids are per resource, so two resources may use the same
        ones). Each id is hashed on its own into its own segment, and hex digests are fixed-width, so the
        key is always well under S3's 1,024 bytes.
        """
        digest = _sha(data)
        message_hash = _sha(message_id.encode("utf-8", "surrogatepass"))
        key = f"{BodyStore.thread_prefix(resource_id, thread_id)}{message_hash}/{digest}.json"
        return BodyRef(key=key, size=len(data), sha256=digest)

    def put(self, ref: BodyRef, data: bytes) -> None:
        """Write a body. Raises ``Unavailable`` when S3 fails or throttles."""
        with translated("store a message body in S3"):
            self._client.put_object(
                Bucket=self.bucket, Key=ref.key, Body=data, ContentType="application/json; charset=utf-8"
            )

    def get(self, ref: BodyRef) -> bytes:
        """Read a body and check it. Raises ``Unavailable`` when S3 fails, the object is missing, or its
        size or SHA-256 differ from the reference."""
        with translated("read a message body from S3"):
            data: bytes = self._client.get_object(Bucket=self.bucket, Key=ref.key)["Body"].read()
        if len(data) != ref.size or _sha(data) != ref.sha256:
            raise Unavailable(f"message body {ref.key!r} in S3 does not match its checksum")
        return data

    def delete(self, keys: Iterable[str]) -> None:
        """Delete bodies (1,000 per request). Raises ``Unavailable`` when S3 fails."""
        unique = sorted(set(keys))
        for start in range(0, len(unique), 1_000):
            chunk = unique[start : start + 1_000]
            with translated("delete message bodies from S3"):
                answer = self._client.delete_objects(
                    Bucket=self.bucket, Delete={"Objects": [{"Key": k} for k in chunk], "Quiet": True}
                )
            if answer.get("Errors"):
                raise Unavailable(f"S3 could not delete {len(answer['Errors'])} message bodies")

    def delete_prefix(self, prefix: str) -> int:
        """Delete every object whose key starts with ``prefix`` (ListObjectsV2 pages of 1,000, each page
        deleted as it is listed), including bodies that no item points at any more (a save that failed
        after its upload). Returns how many objects were deleted. Raises ``Unavailable`` when S3 fails."""
        deleted = 0
        token: str | None = None
        while True:
            request: dict[str, Any] = {"Bucket": self.bucket, "Prefix": prefix, "MaxKeys": 1_000}
            if token:
                request["ContinuationToken"] = token
            with translated("list message bodies in S3"):
                answer = self._client.list_objects_v2(**request)
            keys = [o["Key"] for o in answer.get("Contents", [])]
            self.delete(keys)
            deleted += len(keys)
            token = answer.get("NextContinuationToken")
            if not answer.get("IsTruncated") or not token:
                return deleted

    def delete_quietly(self, keys: Iterable[str]) -> None:
        """Delete bodies, logging (not raising) a failure: for objects nothing points at any more."""
        try:
            self.delete(keys)
        except Unavailable as exc:
            log.warning("orphaned message bodies left in S3", extra={"error": exc.code})

    def close(self) -> None:
        """Close the client's connections (if it was ever created)."""
        if self._made is not None:
            self._made.close()
