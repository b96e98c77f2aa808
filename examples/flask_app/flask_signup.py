"""The Flask recipe (docs/flask.md): an app factory with Flask-SQLAlchemy; a sign-up view saves a
user and enqueues its welcome mail in the same transaction (``conn=db.session``). A sign-up that
fails after the enqueue leaves neither the user nor the job.

    flask --app "flask_signup:create_app('jobq.toml', 'sqlite:///jobq.db')" run
"""

from __future__ import annotations

from typing import Any

from flask import Flask, abort, request
from flask_sqlalchemy import SQLAlchemy
from sqlalchemy import String
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from flask_tasks import welcome
from jobq import JobQueue


class Base(DeclarativeBase):
    pass


db = SQLAlchemy(model_class=Base)


class User(db.Model):  # type: ignore[name-defined,misc]
    __tablename__ = "users"
    id: Mapped[int] = mapped_column(primary_key=True)
    email: Mapped[str] = mapped_column(String(200))


def create_app(config: str, database_url: str) -> Flask:
    """The app: jobq's config file, and the application's database (the one jobq's config
    names: ``sqlite:///...`` or ``postgresql+psycopg://...``)."""
    app = Flask(__name__)
    app.config["SQLALCHEMY_DATABASE_URI"] = database_url
    db.init_app(app)
    with app.app_context():
        db.create_all()
    queue = JobQueue.from_config(config)  # one for the app: any thread of the server may use it
    app.extensions["jobq"] = queue

    @app.post("/signup")
    def signup() -> dict[str, Any]:
        user = User(email=request.form["email"])
        db.session.add(user)
        db.session.flush()  # the user's id
        handle = welcome.using(queue=queue, conn=db.session).enqueue(user.id, user.email)
        if request.form.get("fail"):  # anything that fails before the commit
            db.session.rollback()
            abort(400)
        db.session.commit()  # the user and the job, together
        return {"user": user.id, "job": handle.id, "mail": handle.wait(timeout=30)}

    return app
