"""Process plumbing: the injected clock (``clock``), process identity (``processes``),
signals (``signals``), atomic files (``files``), self-fencing (``fencing``) and logs (``logs``).
"""
