"""Curation: normalization, quality gates, exact and MinHash near dedup, report.

Pure cores (no Spark): ``normalize``, ``quality``, ``minhash``, ``keep``.
Spark: ``spark_adapter`` (Pandas UDF adapters), ``exact_dedup``, ``near_dedup``, ``pipeline``
(``curate(df, cfg)``), ``report``. Settings: ``config`` / ``conf/curate.toml``.
See docs/curation.md.
"""
