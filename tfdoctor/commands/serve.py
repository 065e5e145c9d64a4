from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from tfdoctor.errors import TfdoctorError, UsageError


class ServeCommand:
    """Serve the web UI over the run store: runs list, run pages, comparisons, JSON API.

    Binds to 127.0.0.1 (this machine only) unless --host is given explicitly.

    Examples:
      tfdoctor serve
      tfdoctor serve --port 9000 --home /data/tfdoctor
      tfdoctor serve --host 0.0.0.0        # reachable from other machines: think twice
    """

    name = "serve"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
        parser.add_argument("--port", type=int, default=8765, help="port (default: 8765)")
        parser.add_argument("--home", help="run store directory (default: $TFDOCTOR_HOME or ~/.tfdoctor)")
        parser.add_argument("--open", action="store_true", help="open the runs list in a browser")

    def run(self, args: argparse.Namespace) -> int:
        if not 0 < args.port < 65536:
            raise UsageError(f"--port {args.port}: not a port number")
        try:
            import uvicorn  # noqa: F401

            from tfdoctor.web.main import create_app, port_free, serve
        except ImportError as e:
            raise TfdoctorError(
                f"the web UI needs FastAPI and uvicorn ({e.name} is missing): pip install 'tfdoctor[web]'"
            ) from None
        from tfdoctor.store import default_home

        home = Path(args.home).expanduser() if args.home else default_home()
        if args.home and not home.is_dir():
            raise UsageError(f"--home {home}: no such directory")
        if not port_free(args.host, args.port):
            raise TfdoctorError(f"cannot listen on {args.host}:{args.port}: the port is taken; pass --port")
        shown = "127.0.0.1" if args.host in ("0.0.0.0", "::") else args.host
        url = f"http://{shown}:{args.port}/"
        out = Console(highlight=False)
        out.print(f"tfdoctor: serving runs from {home}", markup=False)
        out.print(f"  open {url}   (API docs: {url}docs; Ctrl-C to stop)", markup=False)
        if args.host not in ("127.0.0.1", "localhost", "::1"):
            out.print(f"  warning: bound to {args.host}: other machines can read these reports", markup=False)
        if args.open:
            import threading
            import webbrowser

            threading.Timer(1.0, webbrowser.open, args=(url,)).start()
        serve(create_app(home), args.host, args.port)
        return 0


COMMAND = ServeCommand
