"""Which GPU architectures the CUDA code in a built object or library carries, read with
cuobjdump (the toolkit here lacks it; the nvidia-cuda-cuobjdump wheel in the project's
environment has it).

Usage: fatbinary.py --expect "75;80;...;120" --library LIB [--objects DIR]
Every object (*.cu.o under DIR) and the library must hold native code (an ELF cubin) for every
expected architecture and PTX of the newest, so a GPU of any of them (and those after the
newest, through the driver's PTX compiler) finds a kernel image. Exit status 1 names what is
missing."""
import argparse
import re
import shutil
import subprocess
import sys
import sysconfig
from collections import Counter
from pathlib import Path


def cuobjdump():
    wheel = Path(sysconfig.get_paths()["purelib"]) / "nvidia" / "cu13" / "bin" / "cuobjdump"
    if wheel.exists():
        return str(wheel)
    return shutil.which("cuobjdump")


def listing(path):
    """(native architectures, PTX architectures) as Counters of compute capability x10."""
    tool = cuobjdump()
    if not tool:
        raise RuntimeError("cuobjdump not found: install the project's environment (requirements.txt pins nvidia-cuda-cuobjdump)")
    p = subprocess.run([tool, "--list-elf", "--list-ptx", str(path)], capture_output=True, text=True, timeout=300)
    text = p.stdout + p.stderr
    if p.returncode != 0 and "No PTX" not in text and "does not contain" not in text:
        raise RuntimeError(f"cuobjdump {path}: {text.strip()[-500:]}")
    elf, ptx = Counter(), Counter()
    for kind, arch in re.findall(r"^(ELF|PTX) file\s+\d+:\s*\S*?sm_(\d+)[a-z]?\.(?:cubin|ptx)", text, re.M):
        (elf if kind == "ELF" else ptx)[int(arch)] += 1
    return elf, ptx


def problems(path, expected, objects=1):
    """What PATH lacks: every expected architecture as native code (once per CUDA object it
    was linked from) and PTX of the newest."""
    elf, ptx = listing(path)
    out = []
    for arch in expected:
        if elf[arch] < objects:
            out.append(f"{path.name}: sm_{arch} native code in {elf[arch]} of {objects} CUDA objects")
    newest = max(expected)
    if ptx[newest] < objects:
        out.append(f"{path.name}: PTX for compute_{newest} in {ptx[newest]} of {objects} CUDA objects")
    return out, elf, ptx


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--expect", required=True, help="compute capabilities x10, ';'-separated")
    ap.add_argument("--library", required=True)
    ap.add_argument("--objects", help="a folder with the *.cu.o objects linked into the library")
    args = ap.parse_args()
    expected = sorted({int(a) for a in args.expect.replace(",", ";").split(";") if a})
    bad = []
    objects = sorted(Path(args.objects).rglob("*.cu.o")) if args.objects else []
    for obj in objects:
        b, elf, ptx = problems(obj, expected)
        bad += b
        print(f"{obj.name}: native {sorted(elf)}, PTX {sorted(ptx)}")
    lib = Path(args.library)
    b, elf, ptx = problems(lib, expected, max(1, len(objects)))
    bad += b
    print(f"{lib.name}: native {dict(sorted(elf.items()))}, PTX {dict(sorted(ptx.items()))} over {len(objects)} CUDA objects")
    if args.objects and not objects:
        bad.append(f"no *.cu.o objects under {args.objects}")
    for line in bad:
        print("MISSING: " + line)
    print(f"Totals: {0 if bad else 1} passed, {1 if bad else 0} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
