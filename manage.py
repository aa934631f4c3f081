#!/usr/bin/env python
"""Django's command-line utility for Jeeves."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "jeeves.settings")
    from django.core.management import execute_from_command_line

    from ground.config import ConfigError

    try:
        execute_from_command_line(sys.argv)
    except ConfigError as exc:
        sys.exit(f"jeeves: configuration error: {exc}")


if __name__ == "__main__":
    main()
