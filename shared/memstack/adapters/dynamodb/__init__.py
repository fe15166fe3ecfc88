"""``MemoryStore`` on DynamoDB (through PynamoDB), with large message bodies in S3.

Public surface: ``DynamoDBMemoryStore`` and ``create_table``. PynamoDB models, botocore clients and their
errors stay inside this package (the key design is in ``docs/dynamodb.md``).
"""

from memstack.adapters.dynamodb.store import DynamoDBMemoryStore
from memstack.adapters.dynamodb.table import create_table

__all__ = ["DynamoDBMemoryStore", "create_table"]
