"""A request-rate answer names its in-flight figure per replica or in all, and running or waiting (probe33 D5).

`fit llama-3.1-8b --device azure-standard_nc40ads_h100_v5 --count 2 --weights fp8 --request-rate 20 --context 4k
--output-tokens 256` printed "114.6 in flight" (one replica's, eq. Q10c) and then "one replica at 103 of the 206
sequences" (the running ones, in all): two counts of different things, neither named. The figures come from the
answer's own load (speed.under_load: in_flight, concurrency running, waiting for admission, eq. Q13) and details
(running_sequences in all)."""

from __future__ import annotations

from cli_capture import run, run_json

ARGS = ("llama-3.1-8b", "--device", "azure-standard_nc40ads_h100_v5", "--count", "2", "--weights", "fp8",
        "--request-rate", "20", "--context", "4k", "--output-tokens", "256")


def test_in_flight_is_named_per_replica_and_split_running_waiting() -> None:
    _, d = run_json("fit", *ARGS)
    load = d["speed"]["under_load"]
    assert d["replicas"] == 2 and load["waiting"] > 0.05  # the premise: two replicas, some wait for admission
    # the split adds up to the in-flight figure it explains (one replica's, to the digit printed)
    assert abs(load["concurrency"] + load["waiting"] - load["in_flight"]) < 0.1
    _, out, _ = run("fit", *ARGS)
    assert (f"({load['in_flight']:.1f} in flight per replica: {load['concurrency']} running, {load['waiting']:.1f} "
            f"waiting for admission; {load['request_rate_per_replica']:g}/s per replica)") in out, out
    assert (f"one replica running {load['concurrency']} of the {d['details']['running_sequences']} sequences "
            "running in all") in out, out
    assert d["details"]["running_sequences"] == 2 * load["concurrency"]
