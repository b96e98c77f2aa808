"""What the programs show: the renderers and the command context that the CLI
(``supervisor/cli``) and the dashboard (``supervisor/web``) share.

The command context (``context``), the actions on jobs named by id (``actions``), the snapshot
of the queue (``snapshot``) and its text (``render``). Nothing in ``shared`` imports this package.
"""
