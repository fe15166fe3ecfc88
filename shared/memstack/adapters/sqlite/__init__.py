"""The embedded default: store, keyword index (per-resource BM25) and vector index (sqlite-vec) in one SQLite file."""
