"""The ``liuyi`` command: serve, translate, models, export.

Every ``serve`` option can also be set with an environment variable (shown in ``--help``);
a flag given on the command line wins over the variable.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

from ._logging import logging_config
from ._models_cli import (
    STORE_COMMANDS,
    add_store_commands,
    run_store_command,
    served_model_paths,
    with_served_models,
)
from ._settings import Settings, env_name, settings_from

# Settings field -> help text; the flag, type and default come from the field itself
_SERVE_OPTIONS: dict[str, str] = {
    "models": "model bundle directory, once per direction (default: the bundled zh->en model)",
    "host": "interface to listen on",
    "port": "TCP port",
    "workers": "worker processes (each loads the models)",
    "threads": "ONNX Runtime threads per decoder call (0 = cores / workers - 1)",
    "max_input_chars": "longest accepted text, in characters",
    "max_body_bytes": "largest accepted request body, in bytes",
    "max_concurrent_streams": "sequences decoded together per model (batch size)",
    "max_queued": "requests allowed to wait for a place; more get 503/429",
    "request_timeout": "seconds before an unfinished request ends with request_timeout",
    "cache_size": "finished translations kept in memory (0 = off)",
    "cache_bytes": "memory the in-process cache may use, in bytes (0 = off)",
    "cache_ttl": "seconds a translation stays in Redis",
    "redis_url": "Redis URL for a cache shared by workers and replicas",
    "api_keys": "accepted API key (repeat for several); none = no authentication",
    "cors_origins": "allowed CORS origin (repeat; '*' = any); none = CORS off",
    "log_level": "debug, info, warning or error",
    "heartbeat_interval": "seconds of silence before a stream ping",
    "shutdown_grace": "seconds running streams get after SIGTERM",
    "header_timeout": "seconds a connection may take to send its request headers (then 408)",
    "keep_alive_timeout": "seconds an idle keep-alive connection stays open",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="liuyi", description="流译 liuyi: streaming Chinese<->English translation"
    )
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser(
        "serve",
        help="run the HTTP server (web page at /)",
        description="Run the translation server. Every option also reads LIUYI_<OPTION>.",
    )
    defaults = Settings()
    for field in fields(Settings):
        if field.name not in _SERVE_OPTIONS:
            continue
        flag = "--" + field.name.replace("_", "-")
        repeated = field.name in ("models", "api_keys", "cors_origins")
        if repeated:
            flag = {"models": "--model", "api_keys": "--api-key", "cors_origins": "--cors-origin"}[field.name]
        kind = _kind(field.type)
        help_text = f"{_SERVE_OPTIONS[field.name]} [env {env_name(field.name)}"
        default = getattr(defaults, field.name)
        help_text += f", default {default!r}]" if default not in ((), None) else "]"
        serve.add_argument(
            flag,
            dest=field.name,
            type=kind,
            action="append" if repeated else "store",
            default=None,
            help=help_text,
        )

    translate = commands.add_parser("translate", help="translate text, streaming to the terminal")
    translate.add_argument("text", help="text to translate ('-' reads standard input)")
    translate.add_argument("--source", default="auto", help="zh, en or auto (default)")
    translate.add_argument("--target", help="zh or en (default: the other language)")
    translate.add_argument("--max-new-tokens", type=int, help="cap on generated tokens per sentence")
    translate.add_argument(
        "--model", type=Path, action="append", help="bundle directory or pulled model name (default: bundled)"
    )
    translate.add_argument("--url", help="use a running server instead, e.g. http://127.0.0.1:8000")
    translate.add_argument("--api-key", help="API key for --url")

    models = commands.add_parser("models", help="list model bundles")
    models.add_argument("--model", type=Path, action="append", help="bundle directory (default: bundled)")
    models.add_argument("--local", action="store_true", help="list the bundles pulled into LIUYI_HOME")
    add_store_commands(commands)

    commands.add_parser("export", help="convert a checkpoint to a bundle (no torch)", add_help=False)
    return parser


def _kind(annotation: object) -> Any:
    text = str(annotation)
    if text.startswith("int"):
        return int
    if text.startswith("float"):
        return float
    if "Path" in text:
        return Path
    return str


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["export"]:  # delegate everything after "export" to the exporter's own parser
        from decoding.export.__main__ import main as export_main

        return export_main(argv[1:])
    args = build_parser().parse_args(argv)
    try:
        if args.command == "serve":
            return serve(args)
        if args.command == "translate":
            return translate(args)
        if args.command in STORE_COMMANDS or (args.command == "models" and args.local):
            return run_store_command(args)
        return list_models(args)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a clean one-line message for the terminal, not a traceback
        from decoding import DecodingError
        from decoding.store import StoreError

        if isinstance(exc, StoreError):
            print(f"liuyi: {exc.code}: {exc}", file=sys.stderr)
            return 2
        if isinstance(exc, DecodingError | ValueError | OSError):
            print(f"liuyi: {exc}", file=sys.stderr)
            return 2
        raise


def serve(args: argparse.Namespace) -> int:
    import logging.config

    from ._serving import run, server_config

    overrides = {f.name: getattr(args, f.name) for f in fields(Settings) if f.name in _SERVE_OPTIONS}
    for name in ("models", "api_keys", "cors_origins"):
        if overrides[name] is not None:
            overrides[name] = tuple(overrides[name])
    settings = with_served_models(settings_from(os.environ, **overrides))
    logging.config.dictConfig(logging_config(settings.log_level))
    from decoding import bundled_models, load_manifest

    names = [
        load_manifest(Path(p), verify_checksums=False).name for p in (settings.models or bundled_models()[:1])
    ]
    url = f"http://{'127.0.0.1' if settings.host in ('0.0.0.0', '::') else settings.host}:{settings.port}/"
    print(
        f"liuyi: serving {', '.join(names)} — open {url} in a browser (API docs: {url}openapi.json)",
        flush=True,
    )
    if settings.workers == 1:
        from ._app import create_app

        return 0 if run(server_config(settings, create_app(settings))) else 3
    from ._metrics import MULTIPROCESS_DIR_VARIABLE

    # Each worker process rebuilds the same settings from the environment, and writes its metrics
    # to files in a directory of its own run, which /metrics in any worker adds up (see _metrics).
    # Stale files from another run would add up too: the directory is fresh, and removed at exit.
    with tempfile.TemporaryDirectory(prefix="liuyi-metrics-") as metrics_dir:
        os.environ.update(_as_environment(settings))
        os.environ[MULTIPROCESS_DIR_VARIABLE] = metrics_dir
        config = server_config(settings, "server._cli:app_from_environment", factory=True)
        return 0 if run(config) else 3


def app_from_environment() -> Any:
    """uvicorn factory for worker processes."""
    from ._app import create_app

    return create_app(settings_from(os.environ))


def _as_environment(settings: Settings) -> dict[str, str]:
    env = {}
    for field in fields(Settings):
        value = getattr(settings, field.name)
        if value is None:
            continue
        if isinstance(value, tuple):
            value = ",".join(str(v) for v in value)
        env[env_name(field.name)] = str(value)
    return env


def translate(args: argparse.Namespace) -> int:
    text = sys.stdin.read() if args.text == "-" else args.text
    if args.url:
        return _translate_remote(args, text)
    from decoding import (
        DecodeOptions,
        Delta,
        LoadOptions,
        ModelRegistry,
        Result,
        RuntimeOptions,
        bundled_models,
        load_bundle,
    )

    load = LoadOptions(
        runtime=RuntimeOptions(intra_op_num_threads=os.cpu_count() or 1, shared_thread_pool=True)
    )
    paths = served_model_paths(args.model) if args.model else bundled_models()[:1]
    registry = ModelRegistry(load_bundle(p, options=load) for p in paths)
    bundle = registry.resolve(args.source, args.target, text)
    for event in bundle.stream(text, options=DecodeOptions(max_new_tokens=args.max_new_tokens)):
        if isinstance(event, Delta):
            sys.stdout.write(event.text)
            sys.stdout.flush()
        elif isinstance(event, Result):
            sys.stdout.write("\n")
            t = event.timings
            print(
                f"[{bundle.name}: {event.output_tokens} tokens, first token {t.first_token_ms:.1f} ms, "
                f"total {t.total_ms:.1f} ms]",
                file=sys.stderr,
            )
    return 0


def _translate_remote(args: argparse.Namespace, text: str) -> int:
    import httpx

    body = {"text": text, "source": args.source, "target": args.target, "max_new_tokens": args.max_new_tokens}
    headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}
    url = args.url.rstrip("/") + "/v1/translate/stream"
    with httpx.stream(
        "POST", url, json={k: v for k, v in body.items() if v is not None}, headers=headers, timeout=None
    ) as response:
        if response.status_code != 200:
            error = json.loads(response.read()).get("error", {})
            print(
                f"liuyi: {response.status_code} {error.get('code')}: {error.get('message')}", file=sys.stderr
            )
            return 1
        for line in response.iter_lines():
            if not line:
                continue
            event = json.loads(line)
            if event["type"] == "delta":
                sys.stdout.write(event["text"])
                sys.stdout.flush()
            elif event["type"] == "done":
                sys.stdout.write("\n")
            elif event["type"] == "error":
                print(f"\nliuyi: {event['code']}: {event['message']}", file=sys.stderr)
                return 1
    return 0


def list_models(args: argparse.Namespace) -> int:
    from decoding import bundled_models, load_manifest

    for path in args.model or bundled_models():
        m = load_manifest(Path(path), verify_checksums=False)
        directions = ",".join(m.served_directions)  # a multilingual bundle serves several
        print(f"{m.name}\t{directions}\t{m.family}\t{m.quantization or 'fp32'}\t{m.license}\t{path}")
    return 0
