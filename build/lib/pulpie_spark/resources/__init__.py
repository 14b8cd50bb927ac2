"""Files shipped inside the package (the bundled sample)."""

from pathlib import Path

RESOURCES = Path(__file__).resolve().parent
SAMPLE_WARC = RESOURCES / "sample" / "sample.warc.gz"
