"""Cluster realism on hand-made cases: GPU types, the rate model, placement effects, racks and
topology, checkpoints, node failures, cluster files and their errors."""

import numpy as np
import pytest

import fastblox
from fastblox.cli import main
from fastblox.cluster import Cluster
from fastblox.cluster_events import ClusterEvents


def W(submit, gpus, dur, **kw):
    return fastblox.Workload.from_arrays(submit_s=submit, num_gpus=gpus, duration_s=dur, **kw)


def row(res, i=0):
    return res.jobs.row(i, named=True)


# ---------------------------------------------------------------- cluster specs
def test_cluster_racks_and_types():
    c = Cluster.parse("v100:4x8,k80:4x4@2")
    assert c.gpu_types == ("v100", "k80") and c.racks.tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    assert c.gpus_of_type().tolist() == [32, 16] and c.largest_gang() == 32


def test_cluster_files(tmp_path):
    f = tmp_path / "c.csv"
    f.write_text("gpus,gpu_type,rack\n8,v100,0\n8,v100,1\n4,k80,1\n")
    c = Cluster.parse(str(f))
    assert c.node_gpus.tolist() == [8, 8, 4] and c.gpu_types == ("v100", "k80") and c.racks.tolist() == [0, 1, 1]
    t = tmp_path / "n2g4.csv"
    t.write_text("num_switch,num_node_p_switch,num_gpu_p_node,num_cpu_p_node,mem_p_node\n2,3,4,128,256\n")
    c = Cluster.parse(str(t))
    assert c.node_gpus.tolist() == [4] * 6 and c.racks.tolist() == [0, 0, 0, 1, 1, 1]
    bad = tmp_path / "bad.csv"
    bad.write_text("gpus,gpu_type\n8,v100\nx,k80\n")
    with pytest.raises(fastblox.ConfigError, match=r"bad.csv: row 3, column 'gpus'"):
        Cluster.parse(str(bad))


@pytest.mark.parametrize("spec,msg", [("v100:4x8@0", "positive number of nodes per rack"),
                                      ("4x8@x", "positive number of nodes per rack")])
def test_cluster_spec_errors(spec, msg):
    with pytest.raises(fastblox.ConfigError, match=msg):
        Cluster.parse(spec)


# ---------------------------------------------------------------- types and rates
def test_a_gang_never_mixes_types_and_runs_at_its_types_speed():
    # 6 GPUs free in all, 3 of each type: a 4-GPU gang cannot start
    w = W([0.0], [4], [100.0])
    with pytest.raises(fastblox.WorkloadError, match="largest GPU type"):
        fastblox.simulate(w, cluster="v100:1x3,k80:1x3", throughput="gavel")
    # a job of unknown model runs at its type's relative speed (Gavel's table: K80 ~ 0.3 x V100)
    w = W([0.0, 0.0], [1, 1], [1000.0, 1000.0])
    res = fastblox.simulate(w, cluster="v100:1x1,k80:1x1", throughput="gavel")
    t = fastblox.throughput.ThroughputTable.builtin().type_speed(("v100", "k80"))
    fin = sorted(res.jobs["finish_s"].to_list())
    assert fin[0] == 1000.0 and fin[1] == pytest.approx(1000.0 / t[1])
    assert set(res.jobs["gpu_type"].to_list()) == {"v100", "k80"}


def test_known_models_work_in_iterations():
    tab = fastblox.throughput.ThroughputTable.builtin()
    m = "ResNet-18 (batch size 32)"
    rate = tab.rates(("p100",), 2)[tab.model_codes([m])[0], 0, 2]
    w = W([0.0], [2], [1.0], iterations=[10_000.0], model=np.array([m]))
    res = fastblox.simulate(w, cluster="p100:1x4", throughput="gavel")
    assert row(res)["finish_s"] == pytest.approx(10_000.0 / rate)


def test_spread_gangs_are_slower():
    w = W([0.0, 0.0], [1, 2], [1000.0, 1000.0])  # the 2-GPU job lands across two 2-GPU nodes
    fast = fastblox.simulate(w, cluster="3x2", placement="first-fit")
    slow = fastblox.simulate(w, cluster="3x2", placement="first-fit", multi_node_factor=0.5)
    assert row(fast, 1)["finish_s"] == 1000.0 and row(slow, 1)["finish_s"] == 2000.0
    racks = fastblox.simulate(w, cluster="3x2@1", placement="first-fit", multi_node_factor=0.5, rack_factor=0.5)
    assert row(racks, 1)["finish_s"] == 4000.0
    # consolidated placement keeps it on one node: no slowdown
    cons = fastblox.simulate(w, cluster="3x2", placement="consolidated", multi_node_factor=0.5)
    assert row(cons, 1)["finish_s"] == 1000.0
    with pytest.raises(fastblox.ConfigError, match="no-placement-effects"):
        fastblox.simulate(w, cluster="3x2", multi_node_factor=0.5, placement_effects=False)


def test_topology_placement_prefers_one_rack():
    # racks of 2 nodes of 4; rack 0 has 2 + 2 free, rack 1 has 4 + 1 free: a 5-GPU job fits in
    # either rack; topology takes the fuller one (rack 0 cannot: 4 < 5), i.e. rack 1
    w = W([0.0, 0.0, 0.0, 1.0], [2, 2, 3, 5], [100.0, 100.0, 100.0, 10.0])
    res = fastblox.simulate(w, cluster="4x4@2", placement="topology", rack_factor=0.5, multi_node_factor=0.9)
    assert row(res, 3)["finish_s"] == pytest.approx(1.0 + 10.0 / 0.9)  # spans nodes, not racks


# ---------------------------------------------------------------- checkpoints and failures
def test_checkpoint_interval_loses_progress_since_the_last_checkpoint():
    # B (higher LAS priority) arrives at 250 and suspends A; A had checkpointed at 200
    w = W([0.0, 250.0], [1, 1], [1000.0, 50.0])
    res = fastblox.simulate(w, cluster="1x1", policy="las", checkpoint_s=100.0)
    a = row(res, 0)
    assert a["lost_s"] == 50.0 and a["num_preemptions"] == 1
    assert a["finish_s"] == 300.0 + 800.0  # resumes at 300 with 800 s left
    assert res.summary["lost_gpu_s"] == 50.0


def test_node_failure_kills_requeues_and_counts():
    w = W([0.0, 0.0], [2, 1], [1000.0, 1000.0])
    ev = [(300.0, "fail", 0), (500.0, "recover", 0)]
    res = fastblox.simulate(w, cluster="2x2", placement="consolidated", cluster_events=ev, checkpoint_s=200.0)
    j0, j1 = row(res, 0), row(res, 1)
    # job 0 held node 0 (best fit: both nodes empty, lowest id): killed at 300, back at 500?
    # no: node 1 has one GPU free after job 1; job 0 needs 2 -> waits for node 0's recovery
    assert j0["num_failures"] == 1 and j0["num_preemptions"] == 0 and j0["lost_s"] == 100.0
    assert j0["finish_s"] == 500.0 + 800.0
    assert j1["num_failures"] == 0 and j1["finish_s"] == 1000.0
    assert res.summary["num_failures"] == 1 and res.summary["cluster_events"] == {"fail": 1, "recover": 1}


def test_rounds_mode_applies_node_events_at_their_own_time():
    w = W([0.0], [1], [1000.0])
    ev = [(450.0, "fail", 0)]
    res = fastblox.simulate(w, cluster="2x1", time_model="rounds", round_s=300, cluster_events=ev)
    j = row(res)
    assert j["num_failures"] == 1 and j["lost_s"] == 0.0
    assert j["finish_s"] == 600.0 + 550.0  # killed at 450 with 550 s left, relaunched at the next boundary


def test_added_nodes_start_out_of_service():
    w = W([0.0, 0.0], [4, 4], [5000.0, 5000.0])
    ev = [(1000.0, "add", 1)]
    res = fastblox.simulate(w, cluster="2x4", cluster_events=ev)
    assert sorted(res.jobs["finish_s"].to_list()) == [5000.0, 6000.0]  # the second starts when node 1 joins


def test_a_cluster_that_never_recovers_is_a_clear_error():
    w = W([0.0, 10.0], [4, 4], [100.0, 100.0])
    with pytest.raises(fastblox.SimulationError, match="cluster events"):
        fastblox.simulate(w, cluster="1x4", cluster_events=[(5.0, "fail", 0)])


def test_random_failures_are_seeded_and_valid():
    c = Cluster.parse("8x4")
    a = ClusterEvents.random_failures(c, 3600.0, 600.0, 86400.0, seed=1)
    b = ClusterEvents.random_failures(c, 3600.0, 600.0, 86400.0, seed=1)
    assert len(a) > 0 and np.array_equal(a.t_s, b.t_s) and a.event == b.event
    assert (np.diff(a.t_s) >= 0).all()


@pytest.mark.parametrize("text,msg", [
    ("time_s,event,node\n10,explode,0\n", "row 2, column 'event': unknown event 'explode'"),
    ("time_s,event,node\n10,fail,9\n", "row 2, column 'node': node 9 does not exist"),
    ("time_s,event,node\n-1,fail,0\n", "row 2, column 'time_s'"),
    ("time_s,event,node\n10,fail,0\n20,fail,0\n", "row 3: node 0 cannot fail at 20 s: it is already out of service"),
    ("time,event,node\n10,fail,0\n", "lacks column"),
])
def test_cluster_event_file_errors(tmp_path, text, msg):
    f = tmp_path / "ev.csv"
    f.write_text(text)
    with pytest.raises(fastblox.ConfigError, match=msg):
        ClusterEvents.read(f, Cluster.parse("2x4"))


def test_cli_realism_flags(tmp_path, capsys):
    ev = tmp_path / "ev.csv"
    ev.write_text("time_s,event,node\n3600,fail,0\n7200,recover,0\n")
    assert main(["run", "--workload", "gavel", "--num-jobs", "60", "--cluster", "v100:2x4,k80:2x4@2",
                 "--placement", "topology", "--policy", "tiresias", "--policy-opt", "promote=2",
                 "--cluster-events", str(ev), "--checkpoint-s", "600", "--json"]) == 0
    out = capsys.readouterr().out
    assert '"num_failures"' in out and '"throughput_table": "gavel"' in out
    # a flag argparse cannot read: one line, exit 2
    assert main(["run", "--workload", "gavel", "--num-jobs", "20", "--policy", "themis", "--policy-opt", "f"]) == 2
    err = capsys.readouterr().err
    assert "expected NAME=VALUE" in err and err.count("\n") == 1
    assert main(["run", "--workload", "gavel", "--num-jobs", "20", "--cluster", "tpu:2x4"]) == 0  # one type: no table
    assert main(["run", "--workload", "gavel", "--num-jobs", "20", "--cluster", "tpu:2x4,v100:2x4"]) == 2
    assert "tpu" in capsys.readouterr().err


def test_rounds_checkpoints_longer_than_a_round_are_refused():
    # LAS swaps the two jobs every round: with checkpoints every 400 s of a 300 s round no
    # progress would ever be kept (the run would never end)
    w = W([0.0, 0.0], [1, 1], [1000.0, 1000.0])
    with pytest.raises(fastblox.ConfigError, match="never reaches a checkpoint"):
        fastblox.simulate(w, cluster="1x1", policy="las", time_model="rounds", round_s=300, checkpoint_s=400)
    res = fastblox.simulate(w, cluster="1x1", policy="las", time_model="rounds", round_s=300, checkpoint_s=200)
    assert res.summary["num_finished"] == 2 and res.summary["lost_gpu_s"] > 0



def test_gpu_type_is_null_for_jobs_never_launched():
    # the run ends when jobs 0 and 1 are done, before job 2 arrives
    res = fastblox.simulate(W([0.0, 0.0, 100.0], [4, 4, 4], [10.0] * 3), cluster="v100:1x4,k80:1x4", track=(0, 1))
    assert res.jobs["gpu_type"].to_list() == ["v100", "k80", None]
