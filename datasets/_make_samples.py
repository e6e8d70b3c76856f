"""Regenerate the bundled samples from ../shared/traces (run from the repository root):

    python datasets/_make_samples.py [/path/to/shared]

Writes philly_sample.csv.gz and philly_cluster_job_log_sample.json. The small Helios, PAI 2020
and SWF samples are hand-written (synthetic) and are not regenerated. See datasets/README.md.
"""

from __future__ import annotations

import copy
import gzip
import io
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
PHILLY_ROWS = 2000
JSON_REAL = 36  # DRE jobs copied (attempt moved into an `attempts` list, values unchanged)


def philly_sample(shared: Path) -> None:
    import polars as pl

    src = shared / "traces" / "philly-rfold" / "jobs.csv.gz"
    df = pl.read_csv(src)
    ok = df.filter((pl.col("duration_s") > 0) & (pl.col("num_gpus") >= 1)).head(PHILLY_ROWS)
    buf = io.BytesIO()
    ok.write_csv(buf)
    # mtime=0: the same input gives the same bytes
    (HERE / "philly_sample.csv.gz").write_bytes(gzip.compress(buf.getvalue(), compresslevel=9, mtime=0))


def cluster_job_log_sample(shared: Path) -> None:
    src = shared / "traces" / "philly-dre-sample" / "sampled_jobs.json.gz"
    jobs = json.loads(gzip.decompress(src.read_bytes()))
    out = []
    for j in jobs[: JSON_REAL + 4]:
        out.append({
            "status": j["status"], "vc": j["vc"], "jobid": j["jobid"], "submitted_time": j["submitted_time"],
            "user": j["user"],
            "attempts": [{"start_time": j["start_time"], "end_time": j["end_time"], "detail": j["detail"]}],
        })
    # Hand-edited cases (documented in README.md), in the upstream cluster_job_log conventions:
    a = out[JSON_REAL]  # 37th: a retried job, its one attempt split in two around a 10-minute gap
    att = a["attempts"][0]
    a["attempts"] = [
        {"start_time": att["start_time"], "end_time": "2017-10-08 12:00:00", "detail": att["detail"]},
        {"start_time": "2017-10-08 12:10:00", "end_time": att["end_time"], "detail": copy.deepcopy(att["detail"])},
    ]
    a["status"] = "Pass"
    b = out[JSON_REAL + 1]  # 38th: a second attempt still running at trace end ("None" end time, as Philly writes)
    b["attempts"].append({"start_time": "2017-10-09 06:00:00", "end_time": "None", "detail": []})
    c = out[JSON_REAL + 2]  # 39th: a job that never got an attempt (Blox drops these)
    c["attempts"] = []
    c["status"] = "Killed"
    d = out[JSON_REAL + 3]  # 40th: an attempt whose machines list no GPUs
    for m in d["attempts"][0]["detail"]:
        m["gpus"] = []
    (HERE / "philly_cluster_job_log_sample.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    shared = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE.parent.parent / "shared"
    philly_sample(shared)
    cluster_job_log_sample(shared)
    print("wrote", ", ".join(p.name for p in (HERE / "philly_sample.csv.gz", HERE / "philly_cluster_job_log_sample.json")))
