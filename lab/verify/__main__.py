"""``python -m lab.verify URL [--model NAME] [--max-tokens N] [--api-key KEY]``: one line per check of
:func:`lab.verify.verify`. Exit status 0 when every check passed, 1 when one failed, 2 for
bad input or a server that does not answer."""

from __future__ import annotations

import argparse
import os
import sys

from lab.verify import API_KEY_ENV, VERIFY_MAX_TOKENS, verify


def _positive(text: str) -> int:
    """``--max-tokens``: a whole number of tokens, at least 1 (argparse says the rest)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of tokens: pass 1 or more")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lab.verify",
        description="Check that an OpenAI-compatible endpoint serves Nemotron 3.5 Lightning the "
        "way the cookbook's notebooks need it (parsers, streaming, schema answers, budget).",
    )
    parser.add_argument("url", help="the server, e.g. http://127.0.0.1:8000")
    parser.add_argument("--model", help="the served model name (default: the first listed)")
    parser.add_argument(
        "--max-tokens",
        type=_positive,
        default=VERIFY_MAX_TOKENS,
        help=f"tokens per request (default {VERIFY_MAX_TOKENS})",
    )
    parser.add_argument(
        "--api-key",
        default=os.environ.get(API_KEY_ENV, "EMPTY"),
        help=f"the key of a server started with --api-key (default: ${API_KEY_ENV}, else any)",
    )
    args = parser.parse_args(argv)
    try:
        checks = verify(args.url, args.model, max_tokens=args.max_tokens, api_key=args.api_key)
    except (TypeError, ValueError) as exc:
        print(f"lab.verify: {str(exc).removeprefix('make_client: ')}", file=sys.stderr)
        return 2
    for c in checks:
        print(c.line(), flush=True)
    if checks[0].ok is not True:
        print("0 checks passed: the model check failed, so nothing else was asked")
        return 2
    failed = [c.name for c in checks if c.ok is False]
    skipped = sum(c.ok is None for c in checks)
    print(
        f"{sum(c.ok is True for c in checks)} of {len(checks)} checks passed"
        + (f", {skipped} skipped" if skipped else "")
        + (f"; failed: {', '.join(failed)}" if failed else "")
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
