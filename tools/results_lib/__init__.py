"""Readers and writers shared by the scripts of tools/ and tools/experiments/.

One definition each of what several scripts read: the throughput benchmark's raw.csv
(raw_csv), a run's records/worker_<rank>.csv and summary.json (records, runs), configs in
text format (textproto), p3_sim's JSON (p3_sim), the models' parameter counts and the link
bound (models), and where things are (paths). A script puts tools/ on sys.path and
imports the modules it needs:

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from results_lib import raw_csv, records  # noqa: E402
"""
