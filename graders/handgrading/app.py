"""The web app of `grade hand` (Flask, served by waitress: serve.py): who may use it, and the
headers every page gets. The pages are pages.py's, the edits actions.py's.

Access: the token printed at start-up (as Jupyter's), then a name the TA gives, recorded with
every mark; the session is a signed cookie (SameSite=Strict, HttpOnly) and every form carries the
session's CSRF value. Pages run no inline script (the CSP allows only our own static file), and
everything from a submission is escaped by the templates' autoescaping."""

import hashlib
import hmac
import secrets
from pathlib import Path
from typing import Any

from flask import Flask, abort, redirect, render_template, request, session, url_for
from werkzeug.wrappers import Response

from graders.handgrading import actions, pages
from graders.handgrading.classroom import Classroom
from graders.handgrading.context import Hand, grader, hand, safe_next
from graders.handgrading.store import Store
from graders.handgrading.writer import ViewWriter

HERE = Path(__file__).resolve().parent
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
    "base-uri 'none'; frame-ancestors 'none'"
)
OPEN = {"login", "static"}  # endpoints reachable before logging in
MAX_NAME = 60


def create_app(room: Classroom, store: Store, writer: ViewWriter, token: str) -> Flask:
    app = Flask(__name__, template_folder=str(HERE / "templates"), static_folder=str(HERE / "static"))
    # Derived from the token: a restart with the same --token keeps the TAs' sessions.
    app.secret_key = hmac.new(token.encode(), b"grade hand session", hashlib.sha256).hexdigest()
    app.config.update(
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Strict",
        MAX_CONTENT_LENGTH=1 << 20,
        TEMPLATES_AUTO_RELOAD=False,
    )
    app.jinja_env.autoescape = True
    app.extensions["hand"] = Hand(room, store, writer, token)
    app.context_processor(_context)
    app.before_request(_guard)
    app.after_request(_headers)
    app.add_url_rule("/login", "login", login, methods=["GET", "POST"])
    app.add_url_rule("/logout", "logout", logout, methods=["POST"])
    pages.register(app)
    actions.register(app)
    return app


def _context() -> dict[str, str]:
    """What every page's layout shows: who is marking, the form's CSRF value, the assignment."""
    return {"grader": grader(), "csrf": str(session.get("csrf", "")), "title": hand().room.spec.title}


def _guard() -> Response | None:
    if request.endpoint in OPEN:
        return None
    if not grader():
        return redirect(url_for("login", next=request.full_path if request.method == "GET" else None))
    if request.method == "POST" and not hmac.compare_digest(request.form.get("csrf", ""), session.get("csrf", "")):
        abort(403, "this form is out of date (its session ended): reload the page")
    return None


def _headers(response: Response) -> Response:
    response.headers.setdefault("Content-Security-Policy", CSP)  # a student's report.html keeps its own
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    response.headers["Cache-Control"] = "no-store"
    return response


def login() -> Any:
    """GET /login?token=T shows the name form (with grader=NAME, logs in at once); POST logs in."""
    given = request.values.get("token", "")
    name = " ".join(request.values.get("grader", "").split())[:MAX_NAME]
    if not hmac.compare_digest(given, hand().token):
        return render_template(
            "login.html.j2", token="", error="the link's token is missing or wrong" if given else ""
        ), 403
    if name:
        session.clear()
        session.update(grader=name, csrf=secrets.token_urlsafe(24))
        return redirect(safe_next(request.values.get("next")))
    return render_template("login.html.j2", token=given, next=request.values.get("next", ""), error="")


def logout() -> Any:
    session.clear()
    return redirect(url_for("login"))
