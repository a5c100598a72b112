"""The layers of docs/architecture.md, checked on every #include of the product's sources.

Direct includes must stay inside what each layer may see (the table below); and nothing ui/ or
core/ includes may reach, through any chain of project headers, a torch, ATen or c10 header: the
facade hides libtorch behind pimpl and plain types, and one stray include would make every Qt
file compile against libtorch again. Run by CTest (test_layers); prints each violation as
FILE:LINE: what, and exits 1 when there is any.
"""
import re
import sys
from pathlib import Path

ROOT = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2]
LAYERS = ("app", "ui", "core", "media", "inference", "kernels", "base")
SOURCES = (".h", ".hpp", ".cpp", ".cu", ".cuh")

# The torch-free headers of inference/ that the Qt layers may use: the facade and the small
# utilities it speaks in (results, text and number formatting, JSON limits, logging).
INFERENCE_PUBLIC = {
    "inference/facade/generator.h",
    "inference/util/result.h",
    "inference/util/format.h",
    "inference/util/text.h",
    "inference/util/jsonlimits.h",
    "inference/util/log.h",
    "inference/inspect/modelinspector.h",
}

# What each layer may include besides itself and the standard and third-party headers.
ALLOWED = {
    "base": set(),
    "kernels": {"base"},
    "inference": {"base", "kernels"},
    "media": {"base", "inference-public"},
    "core": {"base", "media", "inference-public"},
    "ui": {"base", "core", "inference-public"},
    "app": {"base", "core", "ui", "inference", "kernels", "media"},
}

# The model families behind the seam (inference/families/family.h), each in its own folders and
# library: a family never includes another's files, and the rest of inference/ reaches a family
# only through the registry (the developer benchmarks and tests measure pipelines directly).
FAMILIES = {
    "ltx2": ("inference/models/ltx2/", "inference/models/gemma3/"),
    "ideogram4": ("inference/models/ideogram4/", "inference/models/qwen3vl/", "inference/models/flux2/"),
}
MAY_NAME_FAMILIES = ("inference/families/registry.cpp", "inference/bench/")


def family_of(path):
    for name, folders in FAMILIES.items():
        if path.startswith(folders):
            return name
    return None


INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
TORCH = re.compile(r"^(torch|ATen|c10|caffe2)/")


def layer_of(path):
    return path.split("/", 1)[0] if "/" in path and path.split("/", 1)[0] in LAYERS else None


def includes(path):
    out = []
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return out
    for number, line in enumerate(text.splitlines(), 1):
        m = INCLUDE.match(line)
        if m:
            out.append((number, m.group(1), m.group(2)))
    return out


def main():
    files = [p for layer in LAYERS for p in (ROOT / layer).rglob("*") if p.suffix in SOURCES and p.is_file()]
    problems = []
    for path in files:
        rel = path.relative_to(ROOT).as_posix()
        mine = layer_of(rel)
        for number, kind, target in includes(path):
            other = layer_of(target) if kind == '"' else None
            if other is None or other == mine:
                continue
            allowed = ALLOWED[mine]
            ok = other in allowed or (other == "inference" and "inference-public" in allowed and target in INFERENCE_PUBLIC)
            if not ok:
                problems.append(f"{rel}:{number}: {mine}/ may not include {target} (docs/architecture.md, Layers)")

    # The family seam.
    for path in files:
        rel = path.relative_to(ROOT).as_posix()
        if not rel.startswith("inference/"):
            continue
        mine = family_of(rel)
        for number, kind, target in includes(path):
            theirs = family_of(target) if kind == '"' else None
            if theirs is None or theirs == mine:
                continue
            if mine is not None:
                problems.append(f"{rel}:{number}: the {mine} family may not include {target} of the {theirs} family")
            elif not rel.startswith(MAY_NAME_FAMILIES):
                problems.append(f"{rel}:{number}: includes {target}; outside its family, only families/registry.cpp names a family")

    # Torch reached from the Qt layers through any chain of project headers.
    cache = {}

    def reaches_torch(header, seen):
        if header in cache:
            return cache[header]
        if header in seen:
            return None
        seen.add(header)
        found = None
        for _, kind, target in includes(ROOT / header):
            if kind == "<" and TORCH.match(target):
                found = [header, "<" + target + ">"]
                break
            if kind == '"' and layer_of(target) and (ROOT / target).is_file():
                chain = reaches_torch(target, seen)
                if chain:
                    found = [header] + chain
                    break
        cache[header] = found
        return found

    for path in files:
        rel = path.relative_to(ROOT).as_posix()
        if layer_of(rel) not in ("ui", "core", "media"):
            continue
        for number, kind, target in includes(path):
            if kind == "<" and TORCH.match(target):
                problems.append(f"{rel}:{number}: includes <{target}>: {layer_of(rel)}/ compiles without libtorch")
            elif kind == '"' and layer_of(target) and (ROOT / target).is_file():
                chain = reaches_torch(target, set())
                if chain:
                    problems.append(f"{rel}:{number}: reaches libtorch through " + " -> ".join(chain))

    for p in problems:
        print(p)
    print(f"layers: {len(files)} files, {len(problems)} violations")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
