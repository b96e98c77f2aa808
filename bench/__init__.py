"""jobq's benchmark harness: ``python -m bench``. See README "Performance"."""
