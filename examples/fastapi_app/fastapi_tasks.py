"""The FastAPI recipe's task (docs/fastapi.md): the workers import this module
(``handlers = ["fastapi_tasks"]``), the app enqueues it."""

from jobq import task


@task(name="fastapi_signup.welcome")
def welcome(user_id: int, email: str) -> str:
    """Send the welcome mail (here: say what would be sent)."""
    return f"welcome mail for user {user_id} to {email}"
