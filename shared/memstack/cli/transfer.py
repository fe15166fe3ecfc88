"""``memstack export``, ``memstack import`` and ``memstack reindex``: long jobs on a local backend
(``--db`` or ``--backend aws``), with a progress bar and a clean stop (``common.stoppable``).

They read and write the store directly (every resource, with ids, seqs and timestamps kept), which the
HTTP API does not offer, so ``--url`` does not apply; on AWS they run with the deployment's
``MEMSTACK_*`` settings (``--backend aws``)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from memstack.cli.common import (
    backend_arguments,
    embedder_argument,
    existing_database,
    json_argument,
    open_local,
    open_store,
    print_json,
    say,
    stoppable,
)
from memstack.cli.progress import ProgressBar
from memstack.errors import InvalidInput, MemstackError


def add_parsers(sub: Any) -> None:
    """Register ``export``, ``import`` and ``reindex``."""
    export = sub.add_parser(
        "export",
        help="export a thread, a resource or everything as JSONL (docs/export.md)",
        description="Write threads, messages (parts, authors), working memory and observation records as "
        "JSON Lines in the versioned format of docs/export.md. --output writes a file atomically (a "
        "stopped export leaves none); without it the lines go to stdout.",
    )
    _selection(export)
    export.add_argument("--output", "-o", help="file to write (default: stdout)")
    _local(export)
    export.set_defaults(run=run_export)

    load = sub.add_parser(
        "import",
        help="import a JSONL export (into another backend: a migration)",
        description="Validate the whole file first (a bad line or a conflicting target writes nothing), "
        "then write it and index its messages with this backend's embedder. Running it again completes a "
        "stopped import and changes nothing after a finished one.",
    )
    load.add_argument("file", help="the export file (docs/export.md)")
    _local(load, must_exist=False)
    load.set_defaults(run=run_import)

    reindex = sub.add_parser(
        "reindex",
        help="re-embed a database (or one resource) with another embedder; resumable",
        description="Embed every message again with --embedder and index it. Without --resource the whole "
        "database moves to that embedder: on SQLite the index is rebuilt in place and records the new model "
        "(until it finishes, the database opens only for the reindex); on AWS the embedder's own OpenSearch "
        "index is filled (then set MEMSTACK_EMBEDDER). Stopped, it resumes where it stopped when run again. "
        "With --resource, re-embeds that resource's messages missing from the index of the embedder the "
        "database already uses.",
    )
    reindex.add_argument("--resource", help="only this resource (default: every resource)")
    _local(reindex, embedder_help="the embedder to index with (default: MEMSTACK_EMBEDDER, else wordllama)")
    reindex.set_defaults(run=run_reindex)


def _selection(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--resource", help="only this resource (default: everything)")
    parser.add_argument("--thread", help="only this thread of --resource")


def _local(
    parser: argparse.ArgumentParser, *, must_exist: bool = True, embedder_help: str | None = None
) -> None:
    backend_arguments(parser)
    embedder_argument(parser, embedder_help)
    json_argument(parser)
    parser.add_argument("--quiet", action="store_true", help="no progress output")
    parser.set_defaults(must_exist=must_exist)


def run_export(args: argparse.Namespace) -> int:
    """``memstack export``: the file (atomically, via a temporary file beside it) or stdout."""
    from memstack.transfer import Selection, export_jsonl

    selection = Selection(resource_id=args.resource, thread_id=args.thread)
    target = Path(args.output) if args.output else None
    if target is not None and not target.parent.is_dir():
        raise InvalidInput(f"no directory {target.parent} for --output {target}", field="output")
    if target is not None and target.is_dir():
        raise InvalidInput(f"--output {target} is a directory; name a file", field="output")
    partial = target.with_name(f".{target.name}.partial-{os.getpid()}") if target else None
    # the store alone: an export needs no embedder, and works while a reindex is unfinished
    with stoppable(), open_store(args) as store, ProgressBar("export", quiet=args.quiet) as bar:
        try:
            out = partial.open("w", encoding="utf-8") if partial else sys.stdout
            lines, last = 0, ""
            try:
                for line in export_jsonl(store, selection, progress=bar):
                    out.write(line + "\n")
                    lines, last = lines + 1, line
            finally:
                if partial:
                    out.close()
            if target and partial:
                os.replace(partial, target)
        finally:
            if partial:
                partial.unlink(missing_ok=True)
    if target:
        # the end record's counts: what the file holds (the progress bar's total is the threads' last_seq
        # summed, an upper bound while deleted messages leave gaps)
        counts: dict[str, int] = json.loads(last)["counts"]
        held = _counted(counts)
        _report(
            args,
            {"file": str(target), "lines": lines, "counts": counts},
            f"exported {held} ({lines} lines) to {target}",
        )
    return 0


def _counted(counts: dict[str, int]) -> str:
    """``{"threads": 1, "messages": 30}`` → ``1 thread, 30 messages`` (the export file's count keys)."""
    return ", ".join(f"{n} {k.replace('_', ' ')[: -1 if n == 1 else None]}" for k, n in counts.items())


def run_import(args: argparse.Namespace) -> int:
    """``memstack import``: validate, then write and index."""
    from memstack.transfer import check_file, import_jsonl

    path = Path(args.file)
    if not path.is_file():
        raise InvalidInput(f"no file at {path}", field="file")
    with stoppable():
        checked = check_file(path)  # before the database is opened: a bad file leaves no new file behind
    with (
        stoppable(),
        open_local(args, must_exist=False) as memory,
        ProgressBar("import", quiet=args.quiet) as bar,
    ):
        report = import_jsonl(memory, path, progress=bar, checked=checked)
    written = _counted(report.counts)
    text = f"imported {written}; indexed {report.chunks_indexed} chunks"
    if any(report.unchanged.values()):
        same = _counted({k: n for k, n in report.unchanged.items() if n})
        text += f"; already present and left as they were: {same}"
    _report(
        args,
        {"counts": report.counts, "unchanged": report.unchanged, "chunks_indexed": report.chunks_indexed},
        text,
    )
    return 0


def run_reindex(args: argparse.Namespace) -> int:
    """``memstack reindex``: the whole database (rebuilding a SQLite index) or one resource."""
    from memstack.transfer import Selection, reindex

    selection = Selection(resource_id=args.resource)
    existing_database(args)
    memory = _reindex_memory(args)
    with stoppable(), memory, ProgressBar("reindex", quiet=args.quiet) as bar:
        try:
            report = reindex(memory, selection, progress=bar)
        except (KeyboardInterrupt, Exception) as exc:
            # the same command resumes an interrupted or failed run; a refused one (a resource that does not
            # exist, another embedder for one resource) would be refused again
            if not (isinstance(exc, MemstackError) and exc.status < 500):
                say("memstack reindex: not finished; run the same command again to resume")
            raise
    _report(
        args,
        {
            "resources": report.resources,
            "threads": report.threads,
            "messages": report.messages,
            "chunks_embedded": report.chunks,
            "model_id": report.model_id,
            "dimension": report.dimension,
        },
        f"reindexed {report.messages} messages of {report.threads} threads in {report.resources} resources: "
        f"{report.chunks} chunks embedded with {report.model_id} ({report.dimension} dimensions)",
    )
    return 0


def _reindex_memory(args: argparse.Namespace) -> Any:
    """The memory to reindex with: on SQLite without ``--resource``, its index opened for a rebuild.

    Raises:
        InvalidInput: ``--resource`` with another embedder than the SQLite index's (one model per file).
    """
    from memstack.bootstrap import build_local
    from memstack.config import MemoryOptions
    from memstack.settings import load_settings

    settings = load_settings(**({"backend": args.backend} if args.backend else {}))
    embedder = args.embedder or settings.embedder_name
    if settings.backend != "sqlite":
        return open_local(args)
    path = args.db or settings.db_path
    # the deployment's semantic-recall options (chunking, tool text) make the same index entries as its
    # indexer; the other layers take no part in a reindex, so they need no chat model here
    options = {"semantic_recall": (settings.options or {}).get("semantic_recall", True)}
    if not MemoryOptions.parse(options).semantic_recall.enabled:  # refused before the index is touched
        raise InvalidInput("semantic recall is off: there is no index to rebuild", field="semantic_recall")
    if args.resource is None:
        return build_local(path=path, embedder=embedder, options=options, rebuild_index=True)
    try:
        return build_local(path=path, embedder=embedder, options=options)
    except InvalidInput as exc:
        if exc.field not in ("dimension", "embedder"):
            raise
        raise InvalidInput(
            f"{exc.message}. A SQLite database holds one embedding model: --resource re-embeds within the "
            "one it uses; to move to another, reindex the whole database (without --resource)",
            field="embedder",
        ) from None


def _report(args: argparse.Namespace, data: dict[str, Any], text: str) -> None:
    if args.json:
        print_json(data)
    else:
        say(f"memstack {args.command}: {text}")
