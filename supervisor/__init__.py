"""The jobq supervisor: forks and watches worker processes (``python -m supervisor``)."""
from .api import Supervisor

__all__ = ["Supervisor"]
