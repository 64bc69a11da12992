"""What a notebook shows, tested as a notebook shows it: a notebook is run by a real kernel (nbclient), its
outputs read as Jupyter stores them, and the page rendered to HTML (nbconvert) as a reader would open it."""

from __future__ import annotations

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

CELLS = [
    "import eidos as ei\nfrom eidos import col",
    'flow = ei.from_pydict({"k": ["a", "b", "<b>bold?</b>"], "x": [1, 2, 3]}).filter(col("x") > 1)\nflow',
    'flow.run(engine="reference")\nei.last_run()',
    "ei.tensor([[1.0, 2.0], [3.0, 4.0]])",
    "flow.to_pandas()",
]


@pytest.fixture(scope="module")
def notebook():
    book = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in CELLS])
    nbclient.NotebookClient(book, timeout=120, kernel_name="python3").execute()
    return book


def _html(cell) -> str:
    (result,) = [out for out in cell.outputs if out.output_type == "execute_result"]
    return result.data["text/html"]


def test_each_object_shows_as_html_in_the_notebook(notebook):
    flow, run, tensor, frame = (_html(cell) for cell in notebook.cells[1:])
    assert "<strong>eidos Flow</strong>" in flow and "2 columns</span><div>lane " in flow and "Filter(x &gt; 1)" in flow
    assert "<strong>eidos run</strong>" in run and "ran on reference in" in run
    assert "shape (2, 2), float64, on cpu" in tensor and "[[1., 2.]," in tensor
    assert "&lt;b&gt;bold?&lt;/b&gt;" in frame  # pandas' own view of to_pandas()


def test_the_rendered_page_keeps_the_views_and_their_escaping(notebook, tmp_path):
    nbconvert = pytest.importorskip("nbconvert")
    page, _ = nbconvert.HTMLExporter().from_notebook_node(notebook)
    (tmp_path / "notebook.html").write_text(page)
    assert page.count('<div class="eidos"') == 3 and "<b>bold?</b>" not in page
