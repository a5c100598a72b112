"""Writes gallery-v1.sqlite: a gallery as the first studio schema (user_version 1) left it,
for the migration test. Run once; the database is committed. Usage: make_gallery_v1.py OUT"""
import pathlib
import sqlite3
import sys

out = pathlib.Path(sys.argv[1])
out.unlink(missing_ok=True)
here = pathlib.Path(__file__).parent
db = sqlite3.connect(out)
db.executescript("""
CREATE TABLE outputs (
 id INTEGER PRIMARY KEY,
 path TEXT NOT NULL UNIQUE,
 kind TEXT NOT NULL,
 created_unix INTEGER NOT NULL,
 prompt TEXT NOT NULL DEFAULT '',
 model TEXT NOT NULL DEFAULT '',
 recipe TEXT,
 thumbnail BLOB);
CREATE INDEX outputs_created ON outputs(created_unix);
PRAGMA user_version=1;
""")
rows = [
    ("/home/ana/Videos/Vireo Studio/2026-11-29_10-00-00_a red fox.mp4", "video", 1764410400,
     "a red fox runs through the snow at night", "LTX-2.3", (here / "recipe-v0.json").read_text().strip()),
    ("/home/ana/Videos/Vireo Studio/2026-11-30_21-14-03_A lighthouse.mp4", "video", 1764537243,
     "A lighthouse on a cliff at dusk", "LTX-2.3 · Distilled FP8", (here / "recipe-v1.json").read_text().strip()),
    ("/home/ana/Videos/imported/holiday.mp4", "video", 1764000000, "", "", None),
]
db.executemany("INSERT INTO outputs (path, kind, created_unix, prompt, model, recipe) VALUES (?,?,?,?,?,?)", rows)
db.commit()
db.close()
