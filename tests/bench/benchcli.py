"""Runs vireo-cli for a bench script and returns its JSON report (the last line of stdout)."""
from __future__ import annotations

import json
import os
import subprocess
import sys


def run_json(bench: str, cmd: list[str], env: dict | None = None) -> dict:
    """Exits with the command's output when it cannot run, fails, or prints no JSON. env: variables set on top of
    this process's environment."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **env} if env else None)
    except OSError as e:
        sys.exit(f"{bench}: cannot run {cmd[0]}: {e}")
    if p.returncode != 0:
        sys.stderr.write(f"{bench}: `{' '.join(cmd)}` failed (exit {p.returncode}):\n{p.stderr}{p.stdout}")
        sys.exit(1)
    try:
        return json.loads(p.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        sys.exit(f"{bench}: `{' '.join(cmd)}` printed no JSON:\n{p.stdout}{p.stderr}")
