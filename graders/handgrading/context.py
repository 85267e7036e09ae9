"""What the app's requests share: the class, the store and the views' writer of this `grade hand`,
who is marking, and where a form may send the browser next."""

from dataclasses import dataclass

from flask import current_app, session, url_for

from graders.handgrading.classroom import Classroom
from graders.handgrading.store import Store
from graders.handgrading.writer import ViewWriter


@dataclass
class Hand:
    room: Classroom
    store: Store
    writer: ViewWriter
    token: str


def hand() -> Hand:
    found: Hand = current_app.extensions["hand"]
    return found


def grader() -> str:
    return str(session.get("grader", ""))


def safe_next(target: str | None) -> str:
    """Only a path of this app: never another site (an open redirect)."""
    return target if target and target.startswith("/") and not target.startswith("//") else url_for("index")
