"""Compiler options shared by the BUILD files.

OPT: the scheduling core and the data path (p3/, server/, worker/, proto/) are optimised
in every build, fastbuild included. Bazel's fastbuild compiles at -O0, and this code runs
on every slice of every iteration: the send and receive threads, the wire codec, the
generated protobuf code, the servers' handlers (docs/results/throughput/throughput.md,
"History": the data path at -O2). models/, p3/pipeline, tools/launcher and the tests stay
at the default: the models' work is libtorch's, which Debian ships optimised. How the
build is arranged: docs/building.md.
"""

OPT = ["-O2"]
