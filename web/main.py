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
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, PlainTextResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from tfdoctor import __version__
from tfdoctor.errors import TfdoctorError
from tfdoctor.report.html import environment, plotly_js_path
from tfdoctor.rundir import RunDir
from tfdoctor.store import default_home
from tfdoctor.web import routes_api, routes_pages
from tfdoctor.web.deps import Settings

WEB_DIR = Path(__file__).resolve().parent
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
#: Host header names always accepted: this machine's loopback
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})
#: bind addresses that listen on every interface
WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", ""})


def host_name(value: str) -> str:
    """The name in a Host header or a bind address, lower-cased, without port, brackets or final dot."""
    h = value.strip().lower()
    if h.startswith("["):
        h = h[1 : h.find("]")] if "]" in h else h[1:]
    elif h.count(":") == 1:
        h = h.rsplit(":", 1)[0]
    return h.rstrip(".")


def allowed_hosts_for(bind_host: str) -> set[str]:
    """The Host header names a server bound to ``bind_host`` answers: loopback, the name ``--host``
    gave, and for a wildcard bind (0.0.0.0, ::) this machine's host names. A request to an address
    the server actually listens on by number (the connection's own local address) is accepted too."""
    names = set(LOOPBACK_NAMES)
    h = host_name(bind_host)
    if h in WILDCARD_HOSTS:
        names |= {host_name(socket.gethostname()), host_name(socket.getfqdn())}
    else:
        names.add(h)
    return names


class HostCheck:
    """ASGI middleware refusing requests whose Host header names another site (DNS rebinding: a page
    on evil.example whose name is made to resolve to 127.0.0.1 would otherwise read every run).

    ``allowed`` is shared with the app (``app.state.allowed_hosts``): :func:`serve` adds the names
    of the address it binds. A request without a Host header (HTTP/1.0, not a browser) passes.
    """

    def __init__(self, app: ASGIApp, allowed: set[str]):
        self.app = app
        self.allowed = allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            raw = dict(scope.get("headers") or []).get(b"host")
            if raw is not None:
                name = host_name(raw.decode("latin-1"))
                local = scope.get("server") or ("", None)
                if name not in self.allowed and name != host_name(str(local[0] or "")):
                    response = PlainTextResponse(
                        f"tfdoctor: Host {name!r} is not served here (allowed: the names the server "
                        "was started with); open it by 127.0.0.1 or localhost",
                        status_code=400,
                    )
                    await response(scope, receive, send)
                    return
        await self.app(scope, receive, send)


def docs_assets() -> Path | None:
    """Swagger UI's and ReDoc's files as the fastapi-offline package ships them (the ``web`` extra)."""
    try:
        import fastapi_offline
    except ImportError:
        return None
    folder = Path(fastapi_offline.__file__).resolve().parent / "static"
    return folder if (folder / "swagger-ui-bundle.js").is_file() else None


def mount_docs(app: FastAPI) -> None:
    """``/docs`` (Swagger UI) and ``/redoc`` with their scripts served by this app: they work offline."""
    from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html

    assets = docs_assets()

    @app.get("/docs", include_in_schema=False)
    def docs() -> Response:
        if assets is None:
            return PlainTextResponse(
                "The API docs need Swagger UI's files from the fastapi-offline package: "
                "pip install 'tfdoctor[web]'. The schema itself is at /openapi.json.",
                status_code=503,
            )
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title="tfdoctor API",
            swagger_js_url="/static/docs/swagger-ui-bundle.js",
            swagger_css_url="/static/docs/swagger-ui.css",
            swagger_favicon_url="/static/favicon.svg",
        )

    @app.get("/redoc", include_in_schema=False)
    def redoc() -> Response:
        if assets is None:
            return PlainTextResponse("pip install 'tfdoctor[web]' for the API docs", status_code=503)
        return get_redoc_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title="tfdoctor API",
            redoc_js_url="/static/docs/redoc.standalone.js",
            redoc_favicon_url="/static/favicon.svg",
            with_google_fonts=False,
        )

    if assets is not None:
        app.mount("/static/docs", StaticFiles(directory=assets), name="docs-static")


def create_app(home: Path | str | None = None) -> FastAPI:
    """The app serving the run store at ``home`` (default: $TFDOCTOR_HOME or ~/.tfdoctor)."""
    app = FastAPI(
        title="tfdoctor",
        version=__version__,
        description="Runs profiled by tfdoctor: reports, findings, progress, comparisons.",
        docs_url=None,  # /docs is served below with Swagger UI's files from this machine, not a CDN
        redoc_url=None,
    )
    app.state.settings = Settings(home=Path(home) if home is not None else default_home())
    app.state.allowed_hosts = set(LOOPBACK_NAMES)
    app.add_middleware(HostCheck, allowed=app.state.allowed_hosts)
    app.state.templates = environment([WEB_DIR / "templates"])

    @app.get("/static/plotly.min.js", include_in_schema=False)
    def plotly_js() -> FileResponse:
        # served from the installed plotly package: one copy, the same version the static report inlines
        return FileResponse(
            plotly_js_path(), media_type="text/javascript", headers={"Cache-Control": "public, max-age=86400"}
        )

    mount_docs(app)
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

    @app.exception_handler(TfdoctorError)
    async def run_unreadable(request: Request, exc: TfdoctorError) -> Response:
        # a run file that cannot be read (corrupt, a link, not a regular file): one line, not a 500
        detail = str(exc).splitlines()[0][:500] if str(exc) else type(exc).__name__
        return await http_error(request, StarletteHTTPException(status_code=409, detail=detail))

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
    """Run the app with uvicorn until ^C (answering only Host names of ``host``: :class:`HostCheck`)."""
    import uvicorn

    app.state.allowed_hosts.update(allowed_hosts_for(host))

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

        app.state.allowed_hosts.update(allowed_hosts_for(host))
        server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning"))
        threading.Thread(target=server.run, daemon=True).start()
    return url
