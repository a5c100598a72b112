#!/usr/bin/env python3
"""The style and static checks on the files a change touches (a step of scripts/test.sh).

clang-format (.clang-format) must leave every changed C++ source as it is, and clang-tidy
(.clang-tidy: a short list, every finding an error) must find nothing in the changed .cpp/.cu
files that the build compiles. "Changed" is relative to BASE: the commit before HEAD unless
given (VIREO_LINT_BASE or the first argument), so CI checks what the newest commit brought.

Usage: scripts/lint.py [BASE] [--build BUILD_DIR]   (exit 0 clean, 1 findings, 2 misuse)
"""
import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = (".cpp", ".h", ".cu", ".cuh", ".hpp")
# Beyond this many translation units clang-tidy would take longer than the rest of CI (a
# torch-heavy file takes 15-40 s): the rest are named, to be run with a BASE by hand.
MAX_TIDY = int(os.environ.get("VIREO_LINT_MAX_TIDY", "10"))


def git(*args):
    return subprocess.run(["git", "-C", str(ROOT), *args], check=True, capture_output=True, text=True).stdout


def changed_files(base):
    names = git("diff", "--name-only", "--diff-filter=ACMR", base, "HEAD").split()
    return [n for n in names if n.endswith(SOURCES) and (ROOT / n).is_file()
            and not n.startswith(("tests/corpus/", "tests/fuzz/regressions/"))]


def tidy_database(build, out_dir):
    """build's compile_commands.json without GCC's precompiled headers, which clang can't read."""
    entries = json.loads((build / "compile_commands.json").read_text())
    kept = []
    for e in entries:
        args = e["arguments"] if "arguments" in e else shlex.split(e["command"])
        clean, skip = [], False
        for a in args:
            if skip:
                skip = False
                continue
            if a == "-include" or a == "--include":
                skip = True
                continue
            if a.startswith("-include") and "cmake_pch" in a or a == "-Winvalid-pch":
                continue
            clean.append(a)
        kept.append({"directory": e["directory"], "file": e["file"], "arguments": clean})
    (out_dir / "compile_commands.json").write_text(json.dumps(kept))
    return {str(Path(e["file"]).resolve()) for e in kept}


def main():
    args = sys.argv[1:]
    build = ROOT / "build"
    if "--build" in args:
        i = args.index("--build")
        if i + 1 >= len(args):
            print(__doc__)
            return 2
        build = Path(args[i + 1]).resolve()
        del args[i:i + 2]
    base = args[0] if args else os.environ.get("VIREO_LINT_BASE", "HEAD~1")
    try:
        git("rev-parse", "--verify", "--quiet", base + "^{commit}")
    except subprocess.CalledProcessError:
        print(f"lint: {base} is not a commit here (a clone of one commit has nothing to compare with); nothing checked")
        return 0
    files = changed_files(base)
    print(f"lint: {len(files)} C++ file(s) changed since {base}")
    problems = 0

    for f in files:
        formatted = subprocess.run(["clang-format", "--style=file", str(ROOT / f)], capture_output=True, text=True, check=True).stdout
        if formatted != (ROOT / f).read_text(encoding="utf-8", errors="surrogateescape"):
            print(f"lint: {f}: not formatted (clang-format -i {f})")
            problems += 1

    with tempfile.TemporaryDirectory() as tmp:
        if not (build / "compile_commands.json").is_file():
            print(f"lint: {build}/compile_commands.json is missing: build first")
            return 2
        compiled = tidy_database(build, Path(tmp))
        units = [f for f in files if f.endswith(".cpp") and str((ROOT / f).resolve()) in compiled]
        if len(units) > MAX_TIDY:
            print(f"lint: {len(units)} changed files compile; clang-tidy checks the first {MAX_TIDY}, "
                  f"not: {' '.join(units[MAX_TIDY:])}")
            units = units[:MAX_TIDY]
        for f in units:
            r = subprocess.run(["clang-tidy", "-p", tmp, "--quiet", "--extra-arg=-Wno-unknown-warning-option", str(ROOT / f)],
                               capture_output=True, text=True)
            findings = [line for line in r.stdout.splitlines() if ": error:" in line or ": warning:" in line]
            if r.returncode != 0 or findings:
                print(f"lint: {f}: clang-tidy:")
                print("\n".join(findings) if findings else (r.stdout + r.stderr)[-3000:])
                problems += 1
        print(f"lint: clang-tidy checked {len(units)} file(s)")

    print(f"lint: {problems} file(s) with findings")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
