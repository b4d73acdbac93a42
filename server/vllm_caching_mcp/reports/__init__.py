"""Pictures and reports drawn from tool answers: size_offload's memory budget and capacity as SVG, a review
as Markdown (the GitHub job summary) or a standalone HTML page.

Every figure comes from the answer (the result model and, for sizings, the arithmetic it carries in
``SizeOffloadResult.figures``); this package only lays them out.

Why jinja2 templates and not a plotting library: jinja2 is already a dependency (render_config
writes its configs with it), pure Python, and its autoescaping is what keeps a file name or a
message from a pull request from becoming markup. The two pictures are a few rectangles, lines and
labels: matplotlib or plotly would bring native builds and megabytes, and their SVG embeds fonts
or scripts this output must not carry; the pure-Python SVG writers (svgwrite, drawsvg) are thin
element builders that would still leave the layout, which is the work, to this code. The layout
(where each bar, tick and label goes) is computed here in Python, so the tests can check it; the
templates only write it out.
"""
