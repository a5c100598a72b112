"""The installer packages as a user gets them: builds them from the build folder with fast
compression, puts the .deb files into a throwaway root (dpkg -x) and the .tar.gz files into a
folder with spaces in its name, and runs the installed programs from there with a bare
environment: no build tree, no .venv and no LD_LIBRARY_PATH on any search path.

Usage: test_packages.py BUILD_DIR   (environment: VIREO_SOURCE_DIR, VIREO_FIXTURES_ROOT)
VIREO_PACKAGES_KEEP=1 keeps the temporary folder (packages, roots) for a look afterwards."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BUILD = Path(sys.argv[1]).resolve()
SOURCE = Path(os.environ["VIREO_SOURCE_DIR"]).resolve()
FIXTURES = Path(os.environ["VIREO_FIXTURES_ROOT"]).resolve()
PIPELINE = FIXTURES / "ltx2pipeline" / "v23" / "diffusers"
# Where a library may come from: the package's own folder or the distribution's.
SYSTEM_DIRS = ("/lib/", "/lib64/", "/usr/lib/", "/usr/lib64/")
ICON_SIZES = (16, 22, 24, 32, 48, 64, 128, 256, 512)
# The libraries the packaged files may take from the distribution: those with the same soname,
# and symbol versions that exist, on Debian 12, Ubuntu 24.04 and Fedora 40 to 43 (glibc's
# compatibility sonames included). FFmpeg, spdlog and fmt change sonames between them and are
# compiled in; libcurl has versioned symbols on Debian and Ubuntu only, so the programs ask
# for none of its versions.
PORTABLE_SONAMES = re.compile(r"(ld-linux-x86-64\.so\.2|lib[cm]\.so\.6|libdl\.so\.2|libpthread\.so\.0|librt\.so\.1"
                              r"|libutil\.so\.1|libresolv\.so\.2|libgcc_s\.so\.1|libstdc\+\+\.so\.6"
                              r"|libz\.so\.1|libcurl\.so\.4|lib(crypto|ssl)\.so\.3|libQt6[A-Za-z]+\.so\.6)$")
PORTABLE_VERSIONS = re.compile(r"(GLIBC_2\.[0-9.]+|GLIBCXX_3\.4(\.[0-9]+)?|CXXABI_1\.3(\.[0-9]+)?|GCC_[0-9.]+|Qt_6(\.[0-9]+)?"
                               r"|OPENSSL_3\.0\.0)$")
results = {"passed": 0, "failed": 0}
START = time.monotonic()


def check(name, ok, detail=""):
    results["passed" if ok else "failed"] += 1
    print(("PASS   : " if ok else "FAIL!  : ") + name + ("" if ok else f"\n         {detail}"), flush=True)
    return ok


def step(text):
    print(f"-- {time.monotonic() - START:6.1f} s  {text}", flush=True)


def build_machine_paths():
    # sys.prefix is the project's .venv (the Python running this test); base_prefix is /usr.
    paths = {str(BUILD), str(SOURCE), sys.prefix, str(Path(sys.prefix).resolve())}
    venv = SOURCE / ".venv"
    if venv.exists():
        paths |= {str(venv), str(venv.resolve())}
    return sorted(paths)


def bare_env(home):
    """What a user's session gives a program: no LD_LIBRARY_PATH, no PYTHONPATH, no CUDA
    folders, a PATH of system folders only; its own home so nothing of this machine's
    user data is read or written."""
    return {"PATH": "/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8",
            "XDG_DATA_HOME": str(home / ".local/share"), "XDG_CONFIG_HOME": str(home / ".config"),
            "XDG_CACHE_HOME": str(home / ".cache"), "XDG_RUNTIME_DIR": str(home / "run"),
            "HF_HUB_OFFLINE": "1", "TMPDIR": str(home / "tmp")}


def run(cmd, env=None, timeout=300, cwd=None):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env, timeout=timeout, cwd=cwd)


def elf_files(root):
    for path in sorted(Path(root).rglob("*")):
        if path.is_file() and not path.is_symlink():
            with open(path, "rb") as f:
                if f.read(4) == b"\x7fELF":
                    yield path


def check_ldd(prefix, env, label):
    """Every ELF file resolves every library, from the package or the distribution."""
    bad = []
    count = 0
    for elf in elf_files(prefix):
        count += 1
        p = run(["ldd", elf], env=env)
        for line in p.stdout.splitlines():
            line = line.strip()
            if "not found" in line:
                bad.append(f"{elf.relative_to(prefix)}: {line}")
                continue
            m = re.match(r"\S+ => (\S+) \(", line)
            if m and not (m.group(1).startswith(str(prefix) + "/") or m.group(1).startswith(SYSTEM_DIRS)):
                bad.append(f"{elf.relative_to(prefix)}: {line}")
    check(f"{label}: ldd on {count} ELF files finds every library in the package or the system", count >= 4 and not bad,
          "\n         ".join(bad[:20]) or f"only {count} ELF files")


def dynamic_needs(elf):
    """(NEEDED sonames, {soname: symbol versions asked of it}) of one ELF file."""
    dyn = run(["readelf", "-dW", elf]).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", dyn)
    versions = {}
    current = None
    for line in run(["readelf", "-VW", elf]).stdout.splitlines():
        m = re.search(r"File: (\S+)\s+Cnt:", line)
        if m:
            current = versions.setdefault(m.group(1), set())
        m = re.search(r"Name: (\S+)\s+Flags:", line)
        if m and current is not None:
            current.add(m.group(1))
    return needed, versions


def check_portable(prefix, label):
    """What the installed files take from the system exists on every distribution the
    packages are for: portable sonames, portable symbol versions."""
    own = {elf.name for elf in elf_files(prefix)}
    bad, glibc = [], "2.0"
    for elf in elf_files(prefix):
        needed, versions = dynamic_needs(elf)
        for soname in needed:
            if soname not in own and not PORTABLE_SONAMES.match(soname):
                bad.append(f"{elf.name}: {soname}")
        for soname, names in versions.items():
            if soname in own:
                continue
            for v in sorted(names):
                if not PORTABLE_VERSIONS.match(v):
                    bad.append(f"{elf.name}: {soname} version {v}")
                elif v.startswith("GLIBC_2.") and [int(x) for x in v[6:].split(".")] > [int(x) for x in glibc.split(".")]:
                    glibc = v[6:]
    check(f"{label}: the system libraries the programs need have the same soname and symbol versions on Debian 12, "
          f"Ubuntu 24.04 and Fedora (glibc >= {glibc})", not bad, "\n         ".join(sorted(set(bad))[:20]))


def check_no_build_paths(prefix, label):
    """Vireo's own programs and library name no folder of the build machine: nothing compiled in
    runs or reads from there (a bench script, a source file), and __FILE__ and debug info are
    relative (-ffile-prefix-map)."""
    needles = [p.encode() for p in build_machine_paths() if len(p) > 4]
    found = []
    for elf in elf_files(prefix):
        if elf.name not in ("vireo", "vireo-cli") and not elf.name.startswith("libvireo_kernels"):
            continue
        data = elf.read_bytes()
        for n in needles:
            if n in data:
                found.append(f"{elf.name}: {n.decode()} ({data.count(n)} times)")
    check(f"{label}: vireo, vireo-cli and libvireo_kernels.so name no folder of the build machine", not found, "; ".join(found[:10]))


def cuda_archs():
    """The architectures the build's kernels must carry (from its CMake cache); empty without CUDA."""
    cache = (BUILD / "CMakeCache.txt").read_text(errors="replace")
    if not re.search(r"^CMAKE_CUDA_COMPILER:FILEPATH=.+$", cache, re.M):
        return []
    m = re.search(r"^VIREO_CUDA_ARCHS:INTERNAL=(.*)$", cache, re.M)
    return sorted(int(a) for a in m.group(1).split(";") if a) if m else []


def check_fatbinary(prefix, label):
    """The packaged kernels carry native code for every architecture the packaged libtorch runs
    on (and Ada), and PTX of the newest: the same check as the build's test_fatbinary."""
    archs = cuda_archs()
    if not archs:
        print(f"         {label}: built without CUDA kernels; no fatbinary to check")
        return
    sys.path.insert(0, str(SOURCE / "tests" / "kernels"))
    import fatbinary
    libs = [p for p in Path(prefix).rglob("libvireo_kernels.so*") if p.is_file() and not p.is_symlink()]
    if not check(f"{label}: the package holds libvireo_kernels.so", len(libs) == 1, " ".join(map(str, libs))):
        return
    objects = len(list((BUILD / "kernels" / "CMakeFiles" / "vireo_kernels.dir").rglob("*.cu.o")))
    bad, elf, ptx = fatbinary.problems(libs[0], archs, max(1, objects))
    check(f"{label}: libvireo_kernels.so has native code for sm_{', sm_'.join(map(str, archs))} and PTX for "
          f"compute_{max(archs)} in each of its {objects} CUDA objects", not bad, "; ".join(bad[:10]))


def loaded_paths(debug_prefix):
    """The files the dynamic loader opened (LD_DEBUG=libs, dlopen() included)."""
    paths = set()
    for log in Path(debug_prefix).parent.glob(Path(debug_prefix).name + ".*"):
        for m in re.finditer(r"calling init: (.+)$", log.read_text(errors="replace"), re.M):
            paths.add(m.group(1))
        log.unlink()
    return paths


def check_loaded(paths, prefix, label, what):
    foreign = sorted(p for p in paths if not (p.startswith(str(prefix) + "/") or p.startswith(SYSTEM_DIRS)))
    leaked = sorted(p for p in paths if any(p.startswith(b) for b in build_machine_paths()))
    torch = [p for p in paths if p.endswith("/libtorch_cpu.so")]
    check(f"{label}: {what} loads {len(paths)} libraries, libtorch from the package, none from the build machine",
          len(paths) > 10 and not foreign and not leaked and len(torch) == 1 and torch[0].startswith(str(prefix) + "/"),
          "\n         ".join((foreign + leaked)[:20]) + f" libtorch_cpu: {torch}")


def run_installed(prefix, work, label):
    """The programs under PREFIX (bin/, lib/, share/) as a user runs them."""
    home = work / "home"
    for d in ("run", "tmp", ".local/share", ".config", ".cache"):
        (home / d).mkdir(parents=True, exist_ok=True)
    os.chmod(home / "run", 0o700)
    env = bare_env(home)
    cli = prefix / "bin" / "vireo-cli"
    gui = prefix / "bin" / "vireo"
    check(f"{label}: vireo and vireo-cli installed", cli.is_file() and gui.is_file(), str(prefix))
    # The developer benchmarks stay in the build tree.
    benches = sorted(str(p.relative_to(prefix)) for p in prefix.rglob("*") if p.name.startswith("vireo-bench"))
    check(f"{label}: no vireo-bench installed", not benches, " ".join(benches))
    check_ldd(prefix, env, label)
    check_portable(prefix, label)

    debug = work / "ld-debug"
    p = run([cli, "--version"], env=dict(env, LD_DEBUG="libs", LD_DEBUG_OUTPUT=str(debug)), cwd=home)
    check(f"{label}: vireo-cli --version", p.returncode == 0 and p.stdout.startswith("vireo-cli "), p.stderr + p.stdout)
    check_loaded(loaded_paths(debug), prefix, label, "vireo-cli --version")

    p = run([cli, "inspect", PIPELINE], env=env, cwd=home)
    check(f"{label}: vireo-cli inspect on the tiny LTX-2.3 pipeline", p.returncode == 0 and "LTX" in p.stdout, p.stderr + p.stdout[:400])

    out = work / "out dir" / "clip.mp4"
    out.parent.mkdir()
    p = run([cli, "generate", "--model", PIPELINE, "--prompt", "a red fox runs through the snow at night",
             "--frames", 17, "--width", 96, "--height", 64, "--fps", 24, "--seed", 7, "--device", "cpu", "--out", out],
            env=dict(env, LD_DEBUG="libs", LD_DEBUG_OUTPUT=str(debug)), cwd=home)
    ok = check(f"{label}: vireo-cli generate writes an MP4", p.returncode == 0 and out.is_file(), p.stderr[-2000:] + p.stdout[-1000:])
    check_loaded(loaded_paths(debug), prefix, label, "vireo-cli generate")
    if ok:
        probe = run(["ffprobe", "-v", "error", "-count_frames", "-show_streams", "-show_format", "-of", "json", out])
        try:
            info = json.loads(probe.stdout)
            streams = {s["codec_type"]: s for s in info["streams"]}
            ok = (streams["video"]["codec_name"] == "h264" and streams["video"]["nb_read_frames"] == "17"
                  and streams["audio"]["codec_name"] == "aac" and "vireo_recipe" in info["format"]["tags"])
        except (ValueError, KeyError):
            ok = False
        check(f"{label}: ffprobe reads the MP4 (H.264, 17 frames, AAC, recipe)", ok, probe.stderr + probe.stdout[:600])

    p = run([gui, "--measure-startup"], env=dict(env, QT_QPA_PLATFORM="offscreen", LD_DEBUG="libs", LD_DEBUG_OUTPUT=str(debug)),
            cwd=home, timeout=120)
    check(f"{label}: vireo opens its window offscreen and quits cleanly",
          p.returncode == 0 and re.search(r"^startup_seconds \d", p.stdout, re.M) is not None, p.stderr[-2000:] + p.stdout)
    loaded = loaded_paths(debug)
    check_loaded(loaded, prefix, label, "vireo")

    # Without a display: --help and --version answer, a plain start says why it cannot open a
    # window (Qt would abort); one window per data folder.
    for flag, word in (("--help", "Vireo Studio"), ("--version", "vireo ")):
        p = run([gui, flag], env=env, cwd=home, timeout=60)
        check(f"{label}: vireo {flag} works without a display", p.returncode == 0 and word in p.stdout, p.stderr[-600:] + p.stdout)
    p = run([gui], env=env, cwd=home, timeout=60)
    check(f"{label}: vireo without a display says so and exits", p.returncode == 1 and "no display" in p.stderr, f"rc={p.returncode} {p.stderr[-600:]}")
    first = subprocess.Popen([str(gui)], env=dict(env, QT_QPA_PLATFORM="offscreen"), cwd=home, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        lock = home / ".local/share/Vireo/vireo/vireo.lock"
        deadline = time.time() + 60
        while not lock.exists() and first.poll() is None and time.time() < deadline:
            time.sleep(0.2)
        p = run([gui, "--measure-startup"], env=dict(env, QT_QPA_PLATFORM="offscreen"), cwd=home, timeout=120)
        check(f"{label}: a second vireo on the same data folder says the first is running and exits",
              lock.exists() and p.returncode == 1 and "already running" in p.stderr and "startup_seconds" not in p.stdout,
              f"rc={p.returncode} {p.stderr[-600:]}")
    finally:
        first.terminate()
        try:
            first.wait(timeout=30)
        except subprocess.TimeoutExpired:
            first.kill()
            first.wait()
    check(f"{label}: vireo loads Qt's SQLite driver and the offscreen platform from the system",
          any(p.endswith("/libqsqlite.so") for p in loaded) and any(p.endswith("/libqoffscreen.so") for p in loaded),
          " ".join(sorted(p for p in loaded if "qt6/plugins" in p)))

    share = prefix / "share"
    desktop = share / "applications/studio.vireo.Vireo.desktop"
    metainfo = share / "metainfo/studio.vireo.Vireo.metainfo.xml"
    p = run(["desktop-file-validate", desktop])
    check(f"{label}: desktop-file-validate", p.returncode == 0 and not p.stdout.strip(), p.stdout + p.stderr)
    text = desktop.read_text() if desktop.exists() else ""
    check(f"{label}: the desktop file claims no video type", "MimeType=" in text and "video/" not in text, text)
    p = run(["appstreamcli", "validate", "--no-net", "--explain", metainfo])
    check(f"{label}: appstreamcli validate", p.returncode == 0, p.stdout + p.stderr)
    missing = [s for s in ICON_SIZES if not (share / f"icons/hicolor/{s}x{s}/apps/studio.vireo.Vireo.png").is_file()]
    check(f"{label}: icons at {', '.join(map(str, ICON_SIZES))} px and scalable",
          not missing and (share / "icons/hicolor/scalable/apps/studio.vireo.Vireo.svg").is_file(), f"missing {missing}")


def only(folder, pattern):
    found = sorted(folder.glob(pattern))
    if len(found) != 1:
        sys.exit(f"expected one {pattern} in {folder}, found {[f.name for f in found]}")
    return found[0]


def check_debs(pkgs, work):
    app, runtime = only(pkgs, "vireo-studio_*.deb"), only(pkgs, "vireo-studio-runtime-*.deb")
    fields = run(["dpkg-deb", "-f", app]).stdout
    depends = re.search(r"^Depends: (.*)$", fields, re.M).group(1).split(", ")
    runtime_name = run(["dpkg-deb", "-f", runtime, "Package"]).stdout.strip()
    runtime_version = run(["dpkg-deb", "-f", runtime, "Version"]).stdout.strip()
    check("deb: the application depends on its runtime at the version built",
          f"{runtime_name} (>= {runtime_version})" in depends, ", ".join(depends))
    wanted = ("libqt6core6", "libqt6widgets6", "libqt6multimedia6", "libqt6sql6-sqlite", "libcurl4", "libssl3", "zlib1g")
    missing = [w for w in wanted if not any(d.startswith(w) for d in depends)]
    unversioned = [d for d in depends if "(>=" not in d]
    check("deb: Qt, curl, OpenSSL and zlib are dependencies with minimum versions",
          not missing and not unversioned, f"missing {missing}, unversioned {unversioned}")
    # Compiled in: the distributions' own would tie the package to one of them.
    compiled_in = [d for d in depends if re.match(r"lib(av|sw|postproc|x264|spdlog|fmt)", d)]
    check("deb: FFmpeg, x264, spdlog and fmt are compiled in, not dependencies", not compiled_in, ", ".join(compiled_in))
    for deb in (app, runtime):
        files = [l.split()[-1] for l in run(["dpkg-deb", "-c", deb]).stdout.splitlines()]
        outside = [f for f in files if not f.startswith("./usr/")]
        control = work / "control"
        shutil.rmtree(control, ignore_errors=True)
        run(["dpkg-deb", "-e", deb, control])
        scripts = sorted(f.name for f in control.iterdir() if f.name not in ("control", "md5sums"))
        # Nothing outside /usr and no maintainer scripts: removing the package cannot touch
        # models (Hugging Face cache), the gallery or the settings in the user's home.
        check(f"deb: {deb.name} installs only under /usr, with no maintainer scripts",
              not outside and not scripts, f"outside: {outside[:5]} scripts: {scripts}")
    # lintian leaves its ELF cache files (mldbm-elf-*) in TMPDIR: this run's folder, removed at the end.
    p = run(["lintian", "--tag-display-limit", "0", app], env=dict(os.environ, TMPDIR=str(work)), timeout=300)
    errors = [l for l in p.stdout.splitlines() if l.startswith("E:")]
    check(f"lintian {app.name}: no errors", not errors, "\n         ".join(errors))
    print("\n".join("         " + l for l in p.stdout.splitlines() if l.startswith(("W:", "E:"))))
    return app, runtime


def check_uninstall(app, work):
    """Install and remove the application package in a throwaway dpkg root: the program goes,
    the user's data stays."""
    root = work / "dpkg root"
    (root / "var/lib/dpkg/info").mkdir(parents=True)
    (root / "var/lib/dpkg/updates").mkdir()
    (root / "var/lib/dpkg/status").write_text("")
    dpkg = ["dpkg", f"--root={root}", "--force-not-root", "--force-depends", "--force-bad-path", "--force-unsafe-io",
            f"--log={work / 'dpkg.log'}"]
    data = [root / "home/user/.cache/huggingface/hub/models--org--name/blobs/abc",
            root / "home/user/.local/share/Vireo/vireo/gallery.sqlite", root / "home/user/.config/Vireo/vireo.conf",
            root / "home/user/Videos/Vireo Studio/clip.mp4"]
    for f in data:
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text("user data")
    p = run(dpkg + ["-i", app])
    installed = p.returncode == 0 and (root / "usr/bin/vireo").is_file()
    p2 = run(dpkg + ["--purge", "vireo-studio"])
    left = [str(f.relative_to(root)) for f in (root / "usr").rglob("*") if f.is_file()] if (root / "usr").exists() else []
    check("deb: install then purge removes every file of the program and keeps the user's data",
          installed and p2.returncode == 0 and not left and all(f.read_text() == "user data" for f in data),
          p.stderr + p2.stderr + f" left: {left[:5]}")


def main():
    # The packages are built and unpacked outside the build and source trees, so that a path
    # into them can only come from the package itself.
    free = shutil.disk_usage(tempfile.gettempdir()).free
    if free < 20 * 2**30:
        check(f"{tempfile.gettempdir()} has 20 GiB free for the packages and their unpacked copies (set TMPDIR)", False,
              f"{free / 2**30:.1f} GiB free")
        return
    tmp = Path(tempfile.mkdtemp(prefix="vireo-packages-"))
    try:
        pkgs = tmp / "packages"
        step("building the packages (fast compression)")
        p = subprocess.run([SOURCE / "packaging/make-packages.sh", BUILD, "--fast", "--out", pkgs], text=True,
                           capture_output=True, timeout=1500)
        if not check("make-packages.sh --fast builds every package", p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]):
            return
        sizes = {f.name: f.stat().st_size for f in sorted(pkgs.iterdir())}
        for name, size in sizes.items():
            print(f"         {size / 2**20:10.1f} MiB  {name}")
        check("packages: application and runtime as .deb, .rpm and .tar.gz",
              sum(n.endswith(".deb") for n in sizes) == 2 and sum(n.endswith(".rpm") for n in sizes) == 2
              and sum(n.endswith(".tar.gz") for n in sizes) == 2, " ".join(sizes))
        private = set()
        for rpm in sorted(pkgs.glob("*.rpm")):
            files = run(["rpm", "-qpl", rpm]).stdout.split()
            private |= {Path(f).name for f in files if f.startswith("/usr/lib/vireo-studio/")}
            check(f"rpm: {rpm.name} installs only under /usr", files and all(f.startswith("/usr/") for f in files), " ".join(files[:5]))
        for rpm in sorted(pkgs.glob("*.rpm")):
            # The private libraries provide nothing to rpm; a requirement of one could never be met.
            requires = run(["rpm", "-qpR", rpm]).stdout.split("\n")
            bad = [r for r in requires if r.split("(")[0] in private]
            check(f"rpm: {rpm.name} requires none of the private libraries by name", len(requires) > 3 and not bad, " ".join(bad[:10]))
            # Every library requirement is one Fedora can meet: a portable soname asked for
            # with portable symbol versions (Fedora's libcurl has none).
            foreign = []
            for r in requires:
                m = re.match(r"([^()\s]+\.so[^()\s]*)\((.*?)\)\(64bit\)$", r.strip())
                if m and m.group(1) not in private and (not PORTABLE_SONAMES.match(m.group(1))
                                                        or (m.group(2) and not PORTABLE_VERSIONS.match(m.group(2)))):
                    foreign.append(r.strip())
            check(f"rpm: {rpm.name} requires only libraries Fedora provides under the same name and version",
                  not foreign, " ".join(foreign[:10]))

        step("checking the .deb packages")
        app, runtime = check_debs(pkgs, tmp)
        check_uninstall(app, tmp)

        step("the .deb packages unpacked into a throwaway root")
        root = tmp / "deb root"
        for deb in (app, runtime):
            subprocess.run(["dpkg-deb", "-x", deb, root], check=True)
        for deb in (app, runtime):
            deb.unlink()
        work = tmp / "deb work"
        work.mkdir()
        check_fatbinary(root / "usr", "deb")
        check_no_build_paths(root / "usr", "deb")
        run_installed(root / "usr", work, "deb")
        shutil.rmtree(root)

        step("the .tar.gz packages unpacked into a folder with spaces in its name")
        folder = tmp / "My Programs" / "Vireo Studio"
        folder.mkdir(parents=True)
        for tgz in sorted(pkgs.glob("*.tar.gz")):
            subprocess.run(["tar", "-xzf", tgz, "-C", folder], check=True)
            tgz.unlink()
        top = [d.name for d in folder.iterdir()]
        check("tar.gz: both archives unpack into one vireo-studio/ folder", top == ["vireo-studio"], str(top))
        work = tmp / "tgz work"
        work.mkdir()
        run_installed(folder / "vireo-studio", work, "tar.gz")
        step("done")
    finally:
        if os.environ.get("VIREO_PACKAGES_KEEP") == "1":
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


main()
print(f"Totals: {results['passed']} passed, {results['failed']} failed ({time.monotonic() - START:.0f} s)")
sys.exit(1 if results["failed"] or not results["passed"] else 0)
