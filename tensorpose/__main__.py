"""``python -m tensorpose``: :func:`tensorpose.cli.main`. A Ctrl-C while the command line's
modules are still being imported is one line and 130, as one during the command."""

try:
    from .cli import main
except KeyboardInterrupt:
    import sys

    print("tensorpose: interrupted (Ctrl-C) before the command started; nothing was written",
          file=sys.stderr)  # fmt: skip
    raise SystemExit(130) from None

raise SystemExit(main())
