"""``lorentztron`` command line."""

import argparse

import uvicorn

from service.config import get_settings


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="lorentztron", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="start the HTTP service")
    serve.add_argument("--host", default=None)
    serve.add_argument("--port", type=int, default=None)
    args = parser.parse_args(argv)
    settings = get_settings()
    if args.command == "serve":
        uvicorn.run(
            "service.main:create_app",
            factory=True,
            host=args.host or settings.host,
            port=args.port or settings.port,
            log_level=settings.log_level,
        )


if __name__ == "__main__":
    main()
