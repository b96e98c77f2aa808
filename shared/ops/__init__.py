"""The operators' layer (issue 22): what the ops CLI, ``jobq status``/``top``, the metrics and the
dashboard read and write, engine-neutral, over the shared SQL of :mod:`shared.engines.sql`.

Both the CLI (``supervisor/cli``) and the dashboard (``supervisor/web``) use this package and
never import each other.
"""
