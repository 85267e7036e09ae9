"""Serving the app with waitress (a pure-Python, multi-threaded WSGI server): on 127.0.0.1 unless
told otherwise, its address and token printed; SIGINT or SIGTERM stop it, after every view is
written from the marks."""

import ipaddress
import signal
import sys
from types import FrameType

from waitress import create_server

from graders.handgrading.app import create_app
from graders.handgrading.classroom import Classroom
from graders.handgrading.store import Store
from graders.handgrading.writer import ViewWriter

THREADS = 8


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _stop(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def serve(room: Classroom, store: Store, token: str, host: str, port: int) -> int:
    writer = ViewWriter(room)
    writer.refresh()  # grades.csv, the reports and the summary as the store says now
    app = create_app(room, store, writer, token)
    server = create_server(app, host=host, port=port, threads=THREADS, ident="grade-hand")
    bound = server.getsockname()
    where = f"[{bound[0]}]" if ":" in str(bound[0]) else bound[0]
    print(f"grade hand: marking {room.spec.title} at http://{where}:{bound[1]}/login?token={token}", flush=True)
    if not _loopback(host):
        print(
            "grade hand: listening beyond this machine: anyone who can reach it and has the link can enter marks; "
            "serve it behind the course's HTTPS proxy or VPN",
            file=sys.stderr,
            flush=True,
        )
    signal.signal(signal.SIGTERM, _stop)
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
        writer.flush()
        print(f"grade hand: stopped; {room.out / 'grades.csv'} has every mark", flush=True)
    return 0
