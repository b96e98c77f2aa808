"""The Flask recipe's task (docs/flask.md): the workers import this module
(``handlers = ["flask_tasks"]``), the app enqueues it."""

from jobq import task


@task(name="flask_signup.welcome")
def welcome(user_id: int, email: str) -> str:
    """Send the welcome mail (here: say what would be sent)."""
    return f"welcome mail for user {user_id} to {email}"
