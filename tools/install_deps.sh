#!/usr/bin/env bash
# Installs every Debian 12 package the project needs. Idempotent: when all are present it
# only checks (≈1 s) and changes nothing.
set -euo pipefail

PACKAGES=(
  bazel-bootstrap
  g++
  libtorch-dev
  libopenblas0-openmp
  libgrpc++-dev protobuf-compiler-grpc
  libprotobuf-dev protobuf-compiler
  libabsl-dev
  catch2
  nlohmann-json3-dev  # JSON reading and writing (//third_party:json), header-only
  dataset-fashion-mnist
  zlib1g-dev  # models/fashion_mnist.cc reads the gzip IDX files with zlib
  openssl  # tools/make_test_certs.sh
  clang-14 libclang-rt-14-dev  # tools/fuzz.sh (libFuzzer)
  python3-matplotlib
  python3-torch python3-torchvision
  python3-dev pybind11-dev  # worker/python: the `p3` Python extension (pybind11 over the C++ worker)
  iproute2       # launch_cluster's emulated network: ip netns, veth, bridge, tc tbf
  iperf3         # //tests/tools:netem_test cross-checks the emulated links with it
  nftables       # tools/experiments/link_faults.py drops packets on an emulated link with nft
                 # `meta random` rules (the kernel has no netem); //tests/tools:link_faults_test
  openssh-client # launch_cluster --hosts runs processes over ssh
  openssh-server # //tests/tools:multihost_launch_test's ssh cases start their own sshd
                 # (own config, free loopback port); the package's ssh service is not used
  procps         # pgrep, in the same ssh cases
  python3-yaml   # //tests/tools:multihost_launch_test and //tests/cluster:kube_restart_test
                 # parse the Kubernetes manifests
  valgrind       # the heap check of tools/rejoin_memory across rejoins (docs/results/reliability/soak.md)
  # //tests/tools:slurm_cluster_test submits the generated batch script to a private Slurm
  # cluster it starts itself (munged, slurmctld, two slurmd; own config, keys and ports in
  # a temp folder). The packages' own services are not used (docs/multihost.md#tests).
  munge slurmctld slurmd slurm-client
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install_deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

echo "install_deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install_deps: done"
