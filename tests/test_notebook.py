"""notebooks/quickstart.ipynb runs top to bottom in a kernel from this interpreter.

The kernel is a separate process and starts its own local Spark (one core) as a user's
notebook would; a tiny model and four pages keep it short.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from helpers_models import save_tiny_classifier

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "quickstart.ipynb"


def test_quickstart_notebook_runs(tmp_path, monkeypatch):
    # A kernelspec for this interpreter (the venv), found through JUPYTER_PATH only.
    spec_dir = tmp_path / "jupyter" / "kernels" / "pulpie-test"
    spec_dir.mkdir(parents=True)
    (spec_dir / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "pulpie-test", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("PULPIE_QUICKSTART_MODEL", str(save_tiny_classifier(tmp_path / "model", seed=3)))
    monkeypatch.setenv("PULPIE_QUICKSTART_OUTPUT", str(tmp_path / "out"))
    monkeypatch.setenv("PULPIE_QUICKSTART_LIMIT", "4")
    monkeypatch.setenv("PULPIE_SPARK_MASTER", "local[1]")
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)

    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(nb, kernel_name="pulpie-test", timeout=600,
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    outputs = "".join(o.get("text", "") for cell in nb.cells if cell.cell_type == "code"
                      for o in cell.get("outputs", []))
    assert "4 pages: " in outputs
    assert (tmp_path / "out").is_dir() and (tmp_path / "out_rejects").is_dir()
