"""Moving memory in and out of a store: export to JSONL, import (a migration when the target is another
backend) and re-embedding into another embedder's index.

Everything goes through the ports (``MemoryStore``'s listing and ``restore_*`` methods, the recall
engine's indexing into the ``SearchIndex``), so it works the same on SQLite and on DynamoDB + OpenSearch.
The file format is ``records`` (docs/export.md).
"""

from memstack.transfer.exporter import export_jsonl
from memstack.transfer.importer import CheckedFile, ImportReport, check_file, import_jsonl
from memstack.transfer.progress import NoProgress, Progress
from memstack.transfer.records import FORMAT, FORMAT_VERSION
from memstack.transfer.reindex import ReindexReport, reindex
from memstack.transfer.walk import Selection

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "CheckedFile",
    "ImportReport",
    "NoProgress",
    "Progress",
    "ReindexReport",
    "Selection",
    "export_jsonl",
    "check_file",
    "import_jsonl",
    "reindex",
]
