"""Spark stage adapters of the extract pipeline: segment -> classify -> render, plus wiring.

Each module has a pure per-page core (``segment_page``, ``render_page``) that the
Spark adapter calls inside a Pandas UDF, so the cores are testable without Spark.
"""
