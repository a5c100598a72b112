"""The layers' include folders, checked with the compiler itself (cmake/VireoLayers.cmake).

For a source file of media/, core/ and ui/, a one-line file is compiled (syntax only) with that
file's own flags from the build's compile_commands.json: an #include the layer may make must
compile, and one the map forbids (an inference/ header behind the facade, a layer above, media/
from ui/) must fail because the header is not found. A flag change that put the repository
root back on a product target's include path would make a forbidden include compile, and this
fails. Usage: test_layer_includes.py BUILD_DIR; prints each verdict, exits 1 on any wrong one.
"""
import json
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

BUILD = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("build")

# A source file of the layer (whose flags are the layer target's), what it may include, and what
# it may not.
CASES = {
    "media/mediareader.cpp": (
        ["inference/util/result.h", "media/mp4writer.h"],
        ["core/output/recipe.h", "inference/tensorfile/safetensors.h", "kernels/fusedops.h"],
    ),
    "core/output/recipe.cpp": (
        ["inference/facade/generator.h", "inference/util/jsonlimits.h", "base/capability.h"],
        ["inference/quant/quantizedweight.h", "inference/models/ltx2/ltx2pipeline.h", "kernels/fusedops.h", "ui/theme.h"],
    ),
    "ui/pages/generatepage.cpp": (
        ["core/generation/generation.h", "inference/facade/generator.h"],
        ["media/mediareader.h", "inference/families/family.h", "app/cli/args.h"],
    ),
}


def flags_of(entry):
    """The entry's compiler and flags without its input, output and precompiled header."""
    args = shlex.split(entry["command"]) if "command" in entry else list(entry["arguments"])
    out, skip = [], False
    for i, a in enumerate(args):
        if skip:
            skip = False
            continue
        if a in ("-o", "-c"):
            skip = a == "-o"
            continue
        if a == "-include" and i + 1 < len(args) and "cmake_pch" in args[i + 1]:
            skip = True
            continue
        if a == entry["file"] or "cmake_pch" in a:
            continue
        out.append(a)
    return out


def compiles(flags, directory, header, scratch):
    source = scratch / "probe.cpp"
    source.write_text(f'#include "{header}"\n')
    r = subprocess.run(flags + ["-fsyntax-only", str(source)], cwd=directory, capture_output=True, text=True)
    return r.returncode == 0, r.stderr


def main():
    db_path = BUILD / "compile_commands.json"
    if not db_path.exists():
        print(f"{db_path}: missing (configure with CMAKE_EXPORT_COMPILE_COMMANDS)")
        return 1
    root = Path(__file__).resolve().parents[2]
    # A source may be compiled by a test target too (the fuzz readers build core/output/ with
    # the root on their path): the product target's entry is the one whose object lies under
    # the layer's own build folder.
    db = {}
    for e in json.loads(db_path.read_text()):
        source = Path(e["file"]).resolve()
        if not source.is_relative_to(root):
            continue
        args = shlex.split(e["command"]) if "command" in e else e["arguments"]
        output = e.get("output") or next((b for a, b in zip(args, args[1:]) if a == "-o"), "")
        if output.startswith(f"{source.relative_to(root).parts[0]}/CMakeFiles/"):
            db[source] = e
    wrong = 0
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        for source, (allowed, forbidden) in CASES.items():
            entry = db.get((root / source).resolve())
            if entry is None:
                print(f"FAIL {source}: not in {db_path} (was it renamed? update CASES)")
                wrong += 1
                continue
            flags = flags_of(entry)
            for header in allowed:
                ok, err = compiles(flags, entry["directory"], header, scratch)
                print(f"{'ok  ' if ok else 'FAIL'} {source} may include {header}")
                if not ok:
                    print("     " + "\n     ".join(err.splitlines()[:5]))
                    wrong += 1
            for header in forbidden:
                ok, err = compiles(flags, entry["directory"], header, scratch)
                refused = not ok and "No such file or directory" in err
                print(f"{'ok  ' if refused else 'FAIL'} {source} may not include {header}")
                if not refused:
                    print("     " + ("it compiled" if ok else "\n     ".join(err.splitlines()[:5])))
                    wrong += 1
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
