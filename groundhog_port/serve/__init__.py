"""``groundhog-port serve``: a translation server replacing GroundHog's web demo
(``experiments/nmt/web-demo/``: ``sample_server.py``, ``index.html``, ``sampler.php``).

Modules: :mod:`.text` (Moses tokenisation with sacremoses, as the demo's Perl
subprocesses), :mod:`.legacy_api` (the demo's ``GET /?source=...`` query and answer),
:mod:`.engine` (parsing, batched beam search, attention of the chosen translation),
:mod:`.batcher` (one decoding thread, concurrent requests gathered in a short window),
:mod:`.http` (routes, limits, JSON errors, access log) and ``static/`` (the page).
"""
