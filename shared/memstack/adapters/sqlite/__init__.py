"""The embedded default: store, keyword index (FTS5) and vector index (sqlite-vec) in one SQLite file."""
