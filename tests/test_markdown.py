"""html_to_markdown / html_to_text: structure, escaping, math, options, robustness."""

from __future__ import annotations

import re

import pytest

from pulpie_spark.render.markdown import html_to_markdown, html_to_text


def md(html: str, **options) -> str:
    return html_to_markdown(html, **options)


# --- headings, paragraphs, emphasis, whitespace ------------------------------------------


def test_headings_all_levels_and_empty_heading_dropped():
    html = "".join(f"<h{n}>Title {n}</h{n}>" for n in range(1, 7)) + "<h2> </h2><p>body</p>"
    assert md(html) == "\n\n".join(f"{'#' * n} Title {n}" for n in range(1, 7)) + "\n\nbody"
    assert html_to_text(html) == "\n\n".join(f"Title {n}" for n in range(1, 7)) + "\n\nbody"


def test_heading_is_one_line_without_emphasis():
    assert md("<h2>A <b>bold</b><br>title</h2>") == "## A bold title"


def test_paragraphs_and_browser_whitespace_collapse():
    html = "<div>  one\n\t two  </div><p>three<b> four </b>five</p>loose <span>six</span>"
    assert md(html) == "one two\n\nthree **four** five\n\nloose six"
    assert html_to_text(html) == "one two\n\nthree four five\n\nloose six"


def test_emphasis_bold_italic_and_no_doubled_markers():
    assert md("<p><strong>b</strong> <em>i</em> <b><b>nested</b></b> <b><i>both</i></b></p>") == (
        "**b** *i* **nested** ***both***"
    )
    assert md("<p>x<b>   </b>y</p>") == "x y"
    # No-break spaces at the edges stay outside the markers; nbsp-only paragraphs vanish.
    assert md("<p><b>Price:&nbsp;</b>5</p><p>&nbsp;</p><p>end</p>") == "**Price:**\xa05\n\nend"


def test_br_is_a_line_break_and_spaces_around_it_go():
    assert md("<p>line one <br> line two<br><br><br><br>line three</p>") == (
        "line one\nline two\n\nline three"
    )


def test_blockquote_hr_and_definition_list():
    html = ("<blockquote><p>q1</p><p>q2</p></blockquote><hr>"
            "<dl><dt>Term</dt><dd>Definition</dd></dl>")
    assert md(html) == "> q1\n>\n> q2\n\n---\n\nTerm\n: Definition"
    assert html_to_text(html) == "q1\n\nq2\n\nTerm\nDefinition"


def test_nested_blockquote():
    assert md("<blockquote>a<blockquote>b</blockquote></blockquote>") == "> a\n>\n> > b"


# --- escaping ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("# not a heading", "\\# not a heading"),
        ("> not a quote", "\\> not a quote"),
        ("- not a list", "\\- not a list"),
        ("+ not a list", "\\+ not a list"),
        ("* not a list", "\\* not a list"),
        ("1. not a list", "1\\. not a list"),
        ("2) not a list", "2\\) not a list"),
        ("---", "\\---"),
        ("===", "\\==="),
        ("~~~ not a fence", "\\~~~ not a fence"),
        ("#hashtag stays", "#hashtag stays"),
        ("snake_case_name stays", "snake_case_name stays"),
        ("2 * 3 = 6 stays", "2 * 3 = 6 stays"),
        ("C# and 1.5 stay", "C# and 1.5 stay"),
        ("*starred*", "\\*starred\\*"),
        ("_under_", "\\_under\\_"),
        ("a `tick`", "a \\`tick\\`"),
    ],
)
def test_minimal_escaping(text, expected):
    assert md(f"<p>{text}</p>") == expected
    assert html_to_text(f"<p>{text}</p>") == text


def test_line_start_escaping_after_br_and_not_of_own_markup():
    assert md("<p>intro<br>- dash<br>3. three</p>") == "intro\n\\- dash\n3\\. three"
    assert md("<p><b>bold</b> start</p>") == "**bold** start"
    assert md("<ul><li># item</li></ul>") == "- \\# item"


# --- lists -------------------------------------------------------------------------------


def test_nested_lists_ul_in_ol_in_ul_with_start():
    html = ("<ul><li>a<ol start='3'><li>b<ul><li>c</li><li>c2</li></ul></li>"
            "<li>d</li></ol></li><li>e</li></ul>")
    assert md(html) == "- a\n  3. b\n     - c\n     - c2\n  4. d\n- e"
    assert html_to_text(html) == "a\nb\nc\nc2\nd\ne"


def test_ordered_list_value_reversed_and_paragraph_items():
    assert md("<ol><li>a</li><li value='10'>b</li><li>c</li></ol>") == "1. a\n10. b\n11. c"
    assert md("<ol reversed><li>a</li><li>b</li><li>c</li></ol>") == "3. a\n2. b\n1. c"
    assert md("<ol><li><p>p1</p><p>p2</p></li><li>x</li></ol>") == "1. p1\n\n   p2\n2. x"


def test_list_stray_children_and_items_outside_lists():
    # A list directly in a list (common invalid HTML) belongs to the previous item.
    assert md("<ul><li>a</li><ul><li>b</li></ul></ul>") == "- a\n  - b"
    assert md("<div><li>x</li><li>y</li></div>") == "- x\n- y"


# --- tables ------------------------------------------------------------------------------


def test_table_with_thead_pipes_and_flattened_cells():
    html = ("<table><thead><tr><th>Name</th><th>A|B</th></tr></thead><tbody>"
            "<tr><td>x<br>y</td><td><p>p1</p><p>p2</p></td></tr></tbody></table>")
    assert md(html) == "| Name | A\\|B |\n| --- | --- |\n| x y | p1 p2 |"
    assert html_to_text(html) == "Name\tA|B\nx y\tp1 p2"


def test_table_without_thead_uses_first_row_and_pads_colspan():
    html = ("<table><tr><td>h1</td><td>h2</td><td>h3</td></tr>"
            "<tr><td colspan='2'>wide</td><td>c</td></tr><tr><td>short</td></tr></table>")
    assert md(html) == (
        "| h1 | h2 | h3 |\n| --- | --- | --- |\n| wide |  | c |\n| short |  |  |"
    )


def test_table_rowspan_keeps_columns_aligned():
    html = ("<table><tr><th>k</th><th>v</th></tr><tr><td rowspan='2'>r</td><td>1</td></tr>"
            "<tr><td>2</td></tr></table>")
    assert md(html) == "| k | v |\n| --- | --- |\n| r | 1 |\n|  | 2 |"


def test_table_caption_and_thead_not_first():
    html = ("<table><caption>Cap</caption><thead><tr><th>H</th><th>I</th></tr></thead>"
            "<tr><td>1</td><td>2</td></tr></table>")
    assert md(html) == "Cap\n\n| H | I |\n| --- | --- |\n| 1 | 2 |"


def test_layout_tables_render_as_content():
    one_column = "<table><tr><td><h2>Title</h2><p>text</p></td></tr></table>"
    assert md(one_column) == "## Title\n\ntext"
    nested = ("<table><tr><td>side</td><td><table><tr><td>a</td><td>b</td></tr></table>"
              "</td></tr></table>")
    assert md(nested) == "side\n\n| a | b |\n| --- | --- |"


# --- code --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "html, lang",
    [
        ('<pre><code class="language-python">x = 1</code></pre>', "python"),
        ('<pre class="lang-js">x = 1</pre>', "js"),
        ('<div class="highlight highlight-source-python"><pre>x = 1</pre></div>', "python"),
        ('<pre class="brush: js; gutter: false">x = 1</pre>', "js"),
        ('<pre class="sourceCode python"><code>x = 1</code></pre>', "python"),
        ('<div class="highlight-rust notranslate"><div class="highlight"><pre>x = 1</pre></div></div>',
         "rust"),
        ("<pre>x = 1</pre>", ""),
    ],
)
def test_code_block_language(html, lang):
    assert md(html) == f"```{lang}\nx = 1\n```"
    assert html_to_text(html) == "x = 1"


def test_code_block_keeps_whitespace_markup_and_fences_past_backticks():
    html = "<pre>def f():\n    return `a` + ```b```\n\n<b>  end</b></pre>"
    assert md(html) == "````\ndef f():\n    return `a` + ```b```\n\n  end\n````"
    assert html_to_text(html) == "def f():\n    return `a` + ```b```\n\n  end"


def test_code_block_lines_in_divs_and_gutter_skipped():
    assert md("<pre><div>line 1</div><div>line 2</div></pre>") == "```\nline 1\nline 2\n```"
    html = ('<table><tr><td class="gutter"><pre>1\n2</pre></td>'
            '<td class="code"><pre>a\nb</pre></td></tr></table>')
    assert md(html) == "```\na\nb\n```"


def test_inline_code_backtick_escaping():
    assert md("<p>run <code>ls -l</code> now</p>") == "run `ls -l` now"
    assert md("<p><code>a`b</code></p>") == "``a`b``"
    assert md("<p><code>`x</code></p>") == "`` `x ``"
    assert md("<p><code>*not* _emph_</code></p>") == "`*not* _emph_`"
    assert html_to_text("<p>run <code>a`b</code></p>") == "run a`b"


# --- math --------------------------------------------------------------------------------

MATHML_ANNOTATED = (
    "<math><semantics><mrow><msup><mi>x</mi><mn>2</mn></msup></mrow>"
    '<annotation encoding="application/x-tex">x^{2}</annotation></semantics></math>'
)


def test_mathml_annotation_inline_and_display():
    assert md(f"<p>Let {MATHML_ANNOTATED} be.</p>") == "Let $x^{2}$ be."
    display = MATHML_ANNOTATED.replace("<math>", '<math display="block">')
    assert md(f"<p>So {display} holds.</p>") == "So\n\n$$\nx^{2}\n$$\n\nholds."
    assert html_to_text(f"<p>Let {MATHML_ANNOTATED} be.</p>") == "Let x^{2} be."


def test_mathml_without_annotation_uses_alttext_then_text():
    assert md('<p><math alttext="\\alpha+1"><mi>α</mi><mo>+</mo><mn>1</mn></math></p>') == (
        "$\\alpha+1$"
    )
    assert md("<p><math><mi>a</mi><mo>=</mo><mi>b</mi></math></p>") == "$a=b$"


def test_presentation_mathml_is_converted_to_tex():
    html = (
        "<p><math><mrow><msup><mi>x</mi><mn>2</mn></msup><mo>+</mo><mfrac><mn>1</mn>"
        "<msqrt><mi>y</mi></msqrt></mfrac><mo>=</mo><munderover><mo>\u2211</mo><mrow><mi>i</mi>"
        "<mo>=</mo><mn>1</mn></mrow><mi>n</mi></munderover><msub><mi>a</mi><mi>i</mi></msub>"
        "<mo>\u2062</mo><mi>sin</mi><mo>\u2061</mo><mi>x</mi></mrow></math></p>"
    )
    assert md(html) == "$x^2+\\frac{1}{\\sqrt{y}}=\\sum_{i=1}^n a_i\\sin x$"
    matrix = ("<p><math><mover><mi>v</mi><mo>\u2192</mo></mover><mo>=</mo><mfenced><mtable>"
              "<mtr><mtd><mn>1</mn></mtd><mtd><mn>0</mn></mtd></mtr></mtable></mfenced></math></p>")
    assert md(matrix) == "$\\vec{v}=(\\begin{matrix}1 & 0\\end{matrix})$"


def test_katex_inline_and_display_use_tex_annotation():
    katex = (
        '<span class="katex"><span class="katex-mathml"><math><semantics><mrow><mi>E</mi>'
        '</mrow><annotation encoding="application/x-tex">E=mc^2</annotation></semantics>'
        '</math></span><span class="katex-html" aria-hidden="true"><span class="mord">E'
        "</span></span></span>"
    )
    assert md(f"<p>Energy {katex}.</p>") == "Energy $E=mc^2$."
    assert md(f'<p><span class="katex-display">{katex}</span></p>') == "$$\nE=mc^2\n$$"


def test_mathjax_script_pandoc_spans_and_mjx_container():
    mathjax2 = ('<span class="MathJax_Preview">a</span><span class="MathJax">visual a</span>'
                '<script type="math/tex">\\alpha</script>')
    assert md(f"<p>x {mathjax2} y</p>") == "x $\\alpha$ y"
    # (a script before any body content would be parsed into <head>)
    assert md('<p>so</p><script type="math/tex; mode=display">\\sum_i x_i</script>') == (
        "so\n\n$$\n\\sum_i x_i\n$$"
    )
    assert md('<p><span class="math inline">\\(a+b\\)</span></p>') == "$a+b$"
    assert md('<p><span class="math display">\\[a+b\\]</span></p>') == "$$\na+b\n$$"
    mjx = ('<mjx-container class="MathJax" jax="CHTML" display="true"><mjx-math></mjx-math>'
           '<mjx-assistive-mml><math display="block" alttext="y=2"><mi>y</mi></math>'
           "</mjx-assistive-mml></mjx-container>")
    assert md(mjx) == "$$\ny=2\n$$"


def test_mediawiki_math_has_no_duplicate_fallback_image():
    html = ('<p>area <span class="mwe-math-element"><span class="mwe-math-mathml-inline" '
            'style="display: none;"><math alttext="{\\displaystyle \\pi r^2}">'
            '<semantics><mi>π</mi><annotation encoding="application/x-tex">'
            '{\\displaystyle \\pi r^2}</annotation></semantics></math></span>'
            '<img src="f.svg" class="mwe-math-fallback-image-inline" alt="pi r^2"></span></p>')
    assert md(html, images=True) == "area ${\\displaystyle \\pi r^2}$"


# --- links and images ------------------------------------------------------------------------


def test_links_and_images_off_by_default():
    html = '<p>See <a href="http://x.org/a">the docs</a> <img src="p.png" alt="pic"> here.</p>'
    assert md(html) == "See the docs here."
    assert html_to_text(html) == "See the docs here."


def test_links_and_images_on():
    html = ('<p>See <a href="http://x.org/a b(1)">the [docs]</a> '
            '<img src="p.png" alt="a pic"> <a href="#top">top</a> '
            '<a href="javascript:void(0)">js</a> <img src="data:image/png;base64,AAAA" alt="x">'
            '<a href="/i"><img src="i.png" alt="logo"></a></p>')
    assert md(html, links=True, images=True) == (
        "See [the \\[docs\\]](http://x.org/a%20b%281%29) ![a pic](p.png) top js "
        "[![logo](i.png)](/i)"
    )
    assert md(html, links=True) == "See [the \\[docs\\]](http://x.org/a%20b%281%29) top js"
    assert md('<p><img data-src="lazy.jpg" alt="l"></p>', images=True) == "![l](lazy.jpg)"


# --- what is not rendered ----------------------------------------------------------------------


def test_invisible_and_non_content_elements_are_skipped():
    html = (
        "<head><title>T</title><style>p{}</style></head><body><script>var x;</script>"
        "<noscript>enable js</noscript><template><p>tpl</p></template><nav>menu</nav>"
        '<p>keep<span style="display:none">hidden</span><span hidden>h2</span></p>'
        '<p style="visibility: hidden">gone</p><select><option>opt</option></select>'
        "<svg><text>icon</text></svg><!-- comment --><p hidden='until-found'>findable</p></body>"
    )
    assert md(html) == "keep\n\nfindable"
    assert html_to_text(html) == "keep\n\nfindable"


def test_processing_instruction_in_body_is_harmless():
    assert md("<div><?php if (x) { ?>text<?php } ?></div>") == "text"


def test_custom_wrappers_are_unwrapped_inline():
    html = "<p>one <cc-alg-uc-text>two</cc-alg-uc-text> three<x-foo>four</x-foo></p>"
    assert md(html) == "one two threefour"


# --- robustness ----------------------------------------------------------------------------


@pytest.mark.parametrize("html", ["", "   \n", None, "<html></html>", "<p></p>", "<!-- x -->"])
def test_empty_input_gives_empty_output(html):
    assert html_to_markdown(html) == ""
    assert html_to_text(html) == ""


def test_bytes_input_and_wrong_type():
    assert html_to_markdown("<p>é</p>".encode()) == "é"
    with pytest.raises(TypeError):
        html_to_markdown(42)


@pytest.mark.parametrize(
    "open_tags, close_tags, repeat",
    [
        ("<span>", "</span>", 100_000),  # inline nesting
        ("<object><div>", "</div></object>", 50_000),  # block nesting (linear for lexbor)
        ("<table><tr><td><blockquote>", "</blockquote></td></tr></table>", 25_000),
        ("<object><ol><li>", "</li></ol></object>", 33_334),
    ],
)
def test_100k_deep_nesting_does_not_crash(open_tags, close_tags, repeat):
    html = (open_tags + "w ") * repeat + close_tags * repeat
    for render in (html_to_markdown, html_to_text):
        out = render(html)
        assert len(re.findall(r"w", out)) == repeat


def test_one_million_character_blocks():
    words = "word_ *x* | " * 90_000
    out = html_to_markdown(f"<p>{words}</p>")
    assert out.count("word") == 90_000
    cell = html_to_markdown(f"<table><tr><td>a</td><td>{words}</td></tr></table>")
    assert cell.count("\\|") == 90_000
    code = html_to_text("<pre>" + "line\n" * 200_000 + "</pre>")
    assert code.count("\n") == 199_999


def test_deterministic_output():
    html = "<h1>T</h1><ul><li>a</li></ul><table><tr><td>1</td><td>2</td></tr></table>"
    assert html_to_markdown(html) == html_to_markdown(html)
