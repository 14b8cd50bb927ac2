"""Extraction-quality evaluation: metrics (ROUGE-5, shingle F1) and a local harness."""
