"""WARC ingest: ``warc`` (pure core over one file) and ``spark`` (one task per file)."""
