#!/usr/bin/env bash
# Server restarts as on Kubernetes, without Kubernetes: tests/cluster/kube_restart_test.py
# plays kubelet over the commands of the generated manifests (see there).
set -uo pipefail
exec /usr/bin/python3 tests/cluster/kube_restart_test.py
