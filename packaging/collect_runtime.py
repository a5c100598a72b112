"""The runtime package's contents: libtorch and exactly the libraries it loads, taken from the
torch wheel and NVIDIA's wheels in the Python environment that built Vireo.

The walk starts at libtorch.so and follows DT_NEEDED through the wheels' library folders, plus
the few libraries NVIDIA's code opens with dlopen() (listed in DLOPENED with the reason). A
library found in no wheel must come from the system (it becomes a package dependency); one that
is found nowhere stops the walk, except the GPU driver's own libraries.

Run with the environment's Python (it reads the wheels' metadata, it does not import torch):
  collect_runtime.py id                          print the runtime id, e.g. torch2.11.0-cu130
  collect_runtime.py version                     print torch's version, e.g. 2.11.0
  collect_runtime.py sonames                     print every library name the wheels provide
  collect_runtime.py libdirs                     print the wheels' library folders
  collect_runtime.py collect CMAKE_OUT COPYRIGHT_OUT LIBDIR STRIP STRIPPED_DIR
      write a CMake list of the files to install and the package's copyright file, and print
      what was collected and why; libraries that still carry a symbol table are installed
      from a copy in STRIPPED_DIR made by `STRIP --strip-unneeded` (kept between runs)
"""
import hashlib
import importlib.metadata
import os
import re
import runpy
import subprocess
import sys
from pathlib import Path

ROOTS = ["libtorch.so"]

# Libraries that are loaded with dlopen() rather than through DT_NEEDED, by the library on the
# left once it is in the closure. Checked with `strings` on the wheels' libraries.
DLOPENED = {
    # cuDNN 9's libcudnn.so.9 is a shim: it opens its sub-libraries by versioned name.
    "libcudnn.so.9": ["libcudnn_graph.so.9", "libcudnn_ops.so.9", "libcudnn_cnn.so.9", "libcudnn_adv.so.9"],
    "libcudnn_graph.so.9": ["libcudnn_engines_precompiled.so.9", "libcudnn_engines_runtime_compiled.so.9",
                            "libcudnn_heuristic.so.9", "libnvrtc.so.13"],
    # Runtime-compiled kernels in cuBLASLt and cuFFT go through NVRTC, which opens its builtins.
    "libcublasLt.so.13": ["libnvrtc.so.13"],
    "libcufft.so.12": ["libnvrtc.so.13"],
    "libnvrtc.so.13": ["libnvrtc-builtins.so.13.0"],
}

# Opened with dlopen() but deliberately not shipped: libtorch_cuda.so opens
# libtorch_cuda_linalg.so (and through it cuSOLVER, about 300 MB) only for linear algebra on
# CUDA tensors; Vireo runs none (its one solve, the preview projection, runs on the CPU).

# The NVIDIA driver's libraries: installed with the driver, never shipped, absent on machines
# without an NVIDIA GPU (Vireo then runs on the CPU).
DRIVER = {"libcuda.so.1", "libnvidia-ml.so.1"}


def site_packages():
    return Path(importlib.metadata.distribution("torch").locate_file(""))


def torch_version_info():
    info = runpy.run_path(str(site_packages() / "torch" / "version.py"))
    base = info["__version__"].split("+")[0]
    cuda = info.get("cuda")
    return base, ("cu" + cuda.replace(".", "")) if cuda else "cpu"


def wheel_lib_dirs():
    site = site_packages()
    return [site / "torch" / "lib"] + sorted(p for p in (site / "nvidia").glob("*/lib") if p.is_dir())


def dynamic_section(path):
    out = subprocess.run(["readelf", "-dW", str(path)], capture_output=True, text=True, check=True).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", out)
    runpath = re.findall(r"\((?:RUNPATH|RPATH)\)\s+Library r(?:un)?path: \[(.*?)\]", out)
    return needed, runpath


def system_library_dirs():
    """Folders the dynamic loader searches that belong to the distribution (not /usr/local, not
    /opt: a toolkit installed there is the build machine's, not the user's)."""
    out = subprocess.run(["/sbin/ldconfig", "-p"], capture_output=True, text=True, check=True).stdout
    found = {}
    for name, path in re.findall(r"^\s+(\S+) \(libc6,x86-64[^)]*\) => (\S+)$", out, re.M):
        if path.startswith(("/lib/", "/lib64/", "/usr/lib/", "/usr/lib64/")):
            found.setdefault(name, path)
    return found


def owners():
    """Maps each file in the wheels to its distribution (name, version, licence files)."""
    by_file = {}
    for dist in importlib.metadata.distributions():
        files = dist.files or []
        licences = [f for f in files if "/licenses/" in str(f) and str(f).split("/")[0].endswith(".dist-info")]
        if not licences:
            # Some wheels (cuSPARSELt) keep the licence beside the libraries instead.
            licences = [f for f in files if re.fullmatch(r"(?i)licen[cs]e(\.txt|\.md)?", f.name) and len(f.parts) <= 3]
        for f in files:
            if f.suffix == ".so" or ".so." in f.name:
                by_file[Path(dist.locate_file(f)).resolve()] = (dist.metadata["Name"], dist.version,
                                                              [Path(dist.locate_file(x)) for x in licences])
    return by_file


def collect():
    dirs = wheel_lib_dirs()
    system = system_library_dirs()
    chosen = {}     # soname -> (path, reason)
    external = {}   # soname -> system path
    queue = [(name, "root") for name in ROOTS]
    while queue:
        name, reason = queue.pop(0)
        if name in chosen or name in external or name in DRIVER:
            continue
        path = next((d / name for d in dirs if (d / name).is_file()), None)
        if path is None:
            if name in system:
                external[name] = system[name]
                continue
            sys.exit(f"collect_runtime: {name} ({reason}) is in no wheel and not a system library")
        chosen[name] = (path.resolve(), reason)
        needed, _ = dynamic_section(path)
        queue += [(n, f"NEEDED by {name}") for n in needed]
        queue += [(n, f"dlopen()ed by {name}") for n in DLOPENED.get(name, [])]
    return chosen, external


def stripped(path, strip, folder):
    """PATH, or a copy without its symbol table when it has one (Debian policy 10.1; lintian
    calls an unstripped library an error). Several cpack runs may ask at once: each writes its
    own temporary file and renames it into place."""
    sections = subprocess.run(["readelf", "-SW", str(path)], capture_output=True, text=True, check=True).stdout
    if not re.search(r"\]\s+\.symtab\s", sections):
        return path
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / path.name
    if out.exists() and out.stat().st_mtime >= path.stat().st_mtime:
        return out
    tmp = folder / f".{path.name}.{os.getpid()}"
    subprocess.run([strip, "--strip-unneeded", "-o", str(tmp), str(path)], check=True)
    os.replace(tmp, out)
    return out


# Full licence texts Debian keeps in /usr/share/common-licenses (lintian: a copyright file must
# point there rather than repeat them). The package ships them beside the copyright file too,
# for the .rpm and .tar.gz.
COMMON = [
    ("Apache-2.0", "the Apache License 2.0",
     re.compile(r"[ \t]*Apache License\s+Version 2\.0, January 2004.*?END OF TERMS AND CONDITIONS", re.S)),
    ("GPL-3", "the GNU General Public License version 3",
     re.compile(r"[ \t]*GNU GENERAL PUBLIC LICENSE\s+Version 3, 29 June 2007.*?END OF TERMS AND CONDITIONS", re.S)),
]


def point_to_common(text):
    for name, title, pattern in COMMON:
        text = pattern.sub(f"[The full text of {title}: /usr/share/common-licenses/{name} on Debian systems,"
                           f" and {name.replace('GPL-3', 'GPL-3.0')}.txt beside this file.]", text)
    return text


def dep5_text(text):
    lines = text.replace("\t", "    ").splitlines()
    return "\n".join(" " + l.rstrip() if l.strip() else " ." for l in lines)


def write_copyright(chosen, out, libdir):
    owner = owners()
    groups = {}
    for name, (path, _) in sorted(chosen.items()):
        if path not in owner:
            sys.exit(f"collect_runtime: {path} belongs to no installed distribution")
        groups.setdefault(owner[path][:2], [[], owner[path][2]])[0].append(name)
    parts = ["Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/",
             "Comment: libtorch and the NVIDIA libraries it loads, copied unmodified (apart from",
             " their RUNPATH and, where they had one, their symbol table) from the Python wheels",
             " named below.", ""]
    texts = {}
    for (dist, version), (names, licences) in sorted(groups.items()):
        gomp = [n for n in names if n.startswith("libgomp")]
        names = [n for n in names if n not in gomp]
        if not licences:
            sys.exit(f"collect_runtime: the {dist} wheel has no licence file")
        body = point_to_common("\n\n".join(p.read_text(errors="replace").strip() for p in licences))
        texts.setdefault(body, "LicenseRef-wheel-" + hashlib.sha256(body.encode()).hexdigest()[:12])
        if names:
            parts += [f"Files: {' '.join(f'{libdir}/{n}' for n in names)}",
                      f"Copyright: the authors of {dist} {version} (see the licence)",
                      f"License: {texts[body]}", ""]
        if gomp:
            # The torch wheel bundles GCC's OpenMP runtime without saying so in its licence.
            parts += [f"Files: {' '.join(f'{libdir}/{n}' for n in gomp)}",
                      "Copyright: Free Software Foundation, Inc.",
                      "License: GPL-3+ with GCC-exception-3.1",
                      "Comment: GCC's libgomp, bundled in the torch wheel.", ""]
    for body, key in texts.items():
        parts += [f"License: {key}", dep5_text(body), ""]
    licences = Path(__file__).resolve().parent.parent / "LICENSES"
    parts += ["License: GPL-3+ with GCC-exception-3.1",
              dep5_text((licences / "GCC-exception-3.1.txt").read_text() + "\n\n"
                        + "The full text of the GNU General Public License version 3: "
                        + "/usr/share/common-licenses/GPL-3 on Debian systems, and GPL-3.0.txt beside this file."), ""]
    Path(out).write_text("\n".join(parts))


def main():
    command = sys.argv[1] if len(sys.argv) > 1 else ""
    if command == "id":
        base, accel = torch_version_info()
        print(f"torch{base}-{accel}")
    elif command == "version":
        print(torch_version_info()[0])
    elif command == "sonames":
        print("\n".join(sorted({p.name for d in wheel_lib_dirs() for p in d.iterdir() if ".so" in p.name})))
    elif command == "libdirs":
        print("\n".join(str(d) for d in wheel_lib_dirs()))
    elif command == "collect" and len(sys.argv) == 7:
        chosen, external = collect()
        cmake_out, copyright_out, libdir, strip, stripped_dir = sys.argv[2:7]
        files = ";".join(str(stripped(path, strip, stripped_dir)) for path, _ in chosen.values())
        Path(cmake_out).write_text(f'set(VIREO_RUNTIME_FILES "{files}")\n')
        write_copyright(chosen, copyright_out, libdir)
        total = 0
        for name, (path, reason) in sorted(chosen.items()):
            size = path.stat().st_size
            total += size
            print(f"  {name:44} {size / 2**20:8.1f} MiB  {reason}")
        print(f"  {len(chosen)} libraries, {total / 2**30:.2f} GiB; from the system: {' '.join(sorted(external))}")
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
