"""jobq's benchmark harness (issue 7): ``python -m bench``. See README "Performance"."""
