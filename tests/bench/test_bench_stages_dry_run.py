"""bench_gpu_stages.py --dry-run-cpu end to end: the script the GPU machine runs (scripts/gpu-check.sh
--stages), on tiny models on the CPU. It must finish, print the decode's time ratio, peak and error
lines, and Vireo's tiled bf16 decode must match diffusers' where their tilings agree (at 576x64x73
that is the whole video: 18 x 2 latent cells, tiles at columns 0 and 14 in both).

Usage: test_bench_stages_dry_run.py VIREO_BENCH WORK_DIR
"""
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

# bf16 on both sides through a random decoder: measured 3.1e-2 relative, about what bf16 costs each
# side (diffusers bf16 against its float32 decode: 2.4e-2; Vireo bf16 against it: 2.3e-2), spread
# evenly over the columns. A wrong blend or a misplaced tile is of order 1 in a 64-px band of the
# 576, i.e. about 0.3 over the video.
MAX_REL_ERR = 5e-2

bench, work = sys.argv[1], Path(sys.argv[2])
shutil.rmtree(work, ignore_errors=True)
script = Path(__file__).with_name("bench_gpu_stages.py")
report = work / "report.json"
p = subprocess.run([sys.executable, str(script), bench, "--dry-run-cpu", "--repeat", "1", "--work", str(work / "models"),
                    "--report", str(report)], capture_output=True, text=True, timeout=900)
print(p.stdout[-6000:])
failures = []


def check(what, ok, detail=""):
    print(f"{'PASS' if ok else 'FAIL'}: {what}" + (f" ({detail})" if detail and not ok else ""))
    if not ok:
        failures.append(what)


check("bench_gpu_stages.py --dry-run-cpu exits 0", p.returncode == 0, p.stderr[-2000:])
ratio = re.search(r"^   decode time: vireo [0-9.]+ s, diffusers [0-9.]+ s, ratio vireo/diffusers ([0-9.]+)$", p.stdout, re.M)
check("it prints the decode's time ratio", ratio is not None and float(ratio.group(1)) > 0)
check("it prints the decode's peak and the goal line", re.search(r"^   decode peak: vireo .* goal weights \+ peak < 12 GB: ", p.stdout, re.M)
      is not None)
err = re.search(r"^   decode error: max abs ([0-9.e+-]+), rel ([0-9.e+-]+) where the tilings agree \((\d+) of (\d+) rows, (\d+) of (\d+) "
                r"columns\); whole video max abs ([0-9.e+-]+), rel ([0-9.e+-]+)$", p.stdout, re.M)
check("it prints the decode's error", err is not None)
if err:
    rel, rows, height, cols, width, rel_whole = (float(err.group(k)) for k in (2, 3, 4, 5, 6, 8))
    print(f"measured: decode rel err {rel:.3e} where the tilings agree, {rel_whole:.3e} over the whole video, "
          f"max abs {float(err.group(1)):.3e}")
    check("the tilings agree over the whole 576x64 video", (rows, cols) == (height, width) == (64, 576))
    check(f"Vireo's tiled bf16 decode matches diffusers' (rel err {rel:.3e} < {MAX_REL_ERR})", rel < MAX_REL_ERR)
if report.exists():
    r = json.loads(report.read_text())
    d = r["stages"].get("decode", {})
    check("the report holds the decode row with Vireo's own peak",
          d.get("vireo", {}).get("layout") == "tiles 16/2 cells, all frames" and "peak_bytes" in d.get("vireo", {})
          and r["decode_memory_goal"]["goal_bytes"] == 12 * 10**9)
else:
    check("the report was written", False)
if failures:
    print(f"{len(failures)} check(s) failed: {failures}")
    sys.exit(1)
shutil.rmtree(work, ignore_errors=True)
print("all checks passed")
