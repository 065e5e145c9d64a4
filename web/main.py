"""The tfdoctor web UI: ``create_app(home)`` builds the FastAPI app over a run store.

Pages (``/``, ``/runs/{id}``, ``/compare``) render the same templates as the static HTML report;
the JSON API lives under ``/api`` (OpenAPI docs at ``/docs``). Bound to 127.0.0.1 by
``tfdoctor serve`` unless ``--host`` is given. ``open_in_browser(run)`` is what
``tfdoctor profile --open`` calls. For development: ``uvicorn --factory tfdoctor.web.main:create_app``.
"""

from __future__ import annotations

import socket
import threading
import time
import webbrowser
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from tfdoctor import __version__
from tfdoctor.report.html import environment, plotly_js_path
from tfdoctor.rundir import RunDir
from tfdoctor.store import default_home
from tfdoctor.web import routes_api, routes_pages
from tfdoctor.web.deps import Settings

WEB_DIR = Path(__file__).resolve().parent
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765


def create_app(home: Path | str | None = None) -> FastAPI:
    """The app serving the run store at ``home`` (default: $TFDOCTOR_HOME or ~/.tfdoctor)."""
    app = FastAPI(
        title="tfdoctor",
        version=__version__,
        description="Runs profiled by tfdoctor: reports, findings, progress, comparisons.",
    )
    app.state.settings = Settings(home=Path(home) if home is not None else default_home())
    app.state.templates = environment([WEB_DIR / "templates"])

    @app.get("/static/plotly.min.js", include_in_schema=False)
    def plotly_js() -> FileResponse:
        # served from the installed plotly package: one copy, the same version the static report inlines
        return FileResponse(
            plotly_js_path(), media_type="text/javascript", headers={"Cache-Control": "public, max-age=86400"}
        )

    app.mount("/static", StaticFiles(directory=WEB_DIR / "static"), name="static")
    app.include_router(routes_api.router)
    app.include_router(routes_pages.router)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        detail = exc.detail if isinstance(exc.detail, str) else "error"
        if request.url.path.startswith("/api/") or "text/html" not in request.headers.get(
            "accept", "text/html"
        ):
            return JSONResponse({"detail": detail}, status_code=exc.status_code)
        if exc.status_code == 404 and detail == "Not Found":
            detail = "There is no page here."
        html = app.state.templates.get_template("error.html.j2").render(
            status_code=exc.status_code, detail=detail, standalone=False
        )
        return HTMLResponse(html, status_code=exc.status_code)

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError) -> Response:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(x) for x in first.get("loc", ()))
        return JSONResponse({"detail": f"{where}: {first.get('msg', 'invalid')}"}, status_code=422)

    return app


def run_url(run_id: str, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT) -> str:
    shown = "127.0.0.1" if host in ("0.0.0.0", "", "::") else host
    if ":" in shown:
        shown = f"[{shown}]"
    return f"http://{shown}:{port}/runs/{run_id}"


def server_running(host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, timeout: float = 0.5) -> bool:
    """Whether a tfdoctor server answers at host:port (checked via /api/health)."""
    import json
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://{host}:{port}/api/health", timeout=timeout) as r:
            return json.loads(r.read().decode()).get("app") == "tfdoctor"
    except (OSError, ValueError):
        return False


def port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def serve(
    app: FastAPI, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, *, log_level: str = "warning"
) -> None:
    """Run the app with uvicorn until ^C."""
    import uvicorn

    uvicorn.run(app, host=host, port=port, log_level=log_level)


def open_in_browser(
    run: RunDir | str,
    *,
    home: Path | str | None = None,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    block: bool = True,
) -> str:
    """Open a run's page in the user's browser; returns its URL.

    If a tfdoctor server already answers on host:port the page is opened there. Otherwise a server
    over ``home`` is started and the browser opened once it listens; with ``block`` (the CLI) this
    serves until ^C, else the server runs in a daemon thread of this process.
    """
    run_id = run.id if isinstance(run, RunDir) else str(run)
    if isinstance(run, RunDir) and home is None:
        home = run.path.parent.parent  # <home>/runs/<id>
    url = run_url(run_id, host, port)
    if server_running(host, port):
        webbrowser.open(url)
        return url
    if not port_free(host, port):
        from tfdoctor.errors import TfdoctorError

        raise TfdoctorError(
            f"port {port} on {host} is taken by another program; pass --port to choose another"
        )
    app = create_app(home)

    def _open_when_up() -> None:
        for _ in range(100):
            if server_running(host, port, timeout=0.2):
                webbrowser.open(url)
                return
            time.sleep(0.1)

    threading.Thread(target=_open_when_up, daemon=True).start()
    if block:
        print(f"tfdoctor: serving {url} (Ctrl-C to stop)", flush=True)
        serve(app, host, port)
    else:
        import uvicorn

        server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning"))
        threading.Thread(target=server.run, daemon=True).start()
    return url
