#!/usr/bin/env bash
# The LibTorch programs of examples/libtorch (an MNIST CNN with LibTorch's data pipeline, a
# DCGAN with ConvTranspose2d and BCELoss, a WGAN-GP gradient penalty), each built from one file
# against ember (port_*, only the include changed) and against Debian's LibTorch 1.13
# (libtorch_*), run interleaved with the same threads and seeds, and compared: a markdown table
# of the medians over the seeds of each program's result line, and the time ratio ember/LibTorch.
#   tools/libtorch_ports.sh [seeds=3] [mnist_epochs=1] [dcgan_batches=300] [gp_iterations=300]
# The peer runs at its best (../shared/BENCHMARKING.md): the OpenMP OpenBLAS through
# LD_LIBRARY_PATH, and glibc's malloc tuned as bench/libtorch_peer's mallopt calls tune it
# (GLIBC_TUNABLES, so the program itself stays as written). Needs libtorch-dev and ../shared/data.
set -euo pipefail
cd "$(dirname "$0")/.."
seeds="${1:-3}" epochs="${2:-1}" dcgan_batches="${3:-300}" gp_iterations="${4:-300}"
threads=2
cmake --preset bench > /dev/null
cmake --build --preset bench -j "$(nproc)" --target port_mnist_cnn port_dcgan port_gradient_penalty \
  libtorch_mnist_cnn libtorch_dcgan libtorch_gradient_penalty > /dev/null
[ -x build/bench/bench/libtorch_mnist_cnn ] || { echo "libtorch_ports: LibTorch not found (apt-get install libtorch-dev)" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for f in ../shared/data/mnist/*.gz; do gunzip -c "$f" > "$work/$(basename "$f" .gz)"; done  # LibTorch reads raw IDX only
openblas=/usr/lib/x86_64-linux-gnu/openblas-openmp
# Without it LibTorch would run, silently, on Debian's reference BLAS (6-16x slower here).
[ -e "$openblas/libblas.so.3" ] || { echo "libtorch_ports: $openblas missing (apt-get install libopenblas0-openmp)" >&2; exit 1; }
peer_env=(env "LD_LIBRARY_PATH=$openblas${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
          "GLIBC_TUNABLES=glibc.malloc.mmap_threshold=268435456:glibc.malloc.trim_threshold=1073741824")

results="$work/results"
run() {  # engine program args...
  local engine="$1" program="$2"
  shift 2
  local binary
  if [ "$engine" = ember ]; then binary="build/bench/examples/port_$program"; else binary="build/bench/bench/libtorch_$program"; fi
  local line
  if [ "$engine" = ember ]; then
    line=$(cd "$work" && "$OLDPWD/$binary" "$@" | grep '^result ')
  else
    line=$(cd "$work" && "${peer_env[@]}" "$OLDPWD/$binary" "$@" | grep '^result ')
  fi
  echo "$engine $line" >> "$results"
}
for seed in $(seq 1 "$seeds"); do
  for engine in ember libtorch; do run "$engine" mnist_cnn "$work" "$epochs" -1 "$threads" "$seed"; done
  for engine in ember libtorch; do run "$engine" dcgan "$work" "$dcgan_batches" "$threads" "$seed"; done
  for engine in ember libtorch; do run "$engine" gradient_penalty "$gp_iterations" "$threads" "$seed"; done
done

echo "LibTorch programs, ember (the same file with <ember/torch.h>) against LibTorch 1.13, $threads threads,"
echo "seeds 1..$seeds; $(lscpu | sed -n 's/^Model name: *//p'), $(date -u +%Y-%m-%d)"
echo
python3 - "$results" <<'PY'
import statistics, sys, collections
rows = collections.defaultdict(lambda: collections.defaultdict(list))
for line in open(sys.argv[1]):
    engine, _, program, *fields = line.split()
    for f in fields:
        k, v = f.split("=")
        rows[program][(engine, k)].append(float(v))
def cell(values):  # the median, and the range over the seeds
    return f"{statistics.median(values):.4f} ({min(values):.4f} to {max(values):.4f})"
print("| program | metric | ember: median (range over seeds) | LibTorch: median (range) |")
print("|---|---|---|---|")
for program, d in rows.items():
    keys = [k for (e, k) in d if e == "ember"]
    for k in keys:
        print(f"| {program} | {k} | {cell(d[('ember', k)])} | {cell(d[('libtorch', k)])} |")
    ratios = [a / b for a, b in zip(d[("ember", "seconds")], d[("libtorch", "seconds")])]
    print(f"| {program} | time ember/LibTorch | {statistics.median(ratios):.2f}x | (per seed: {', '.join(f'{r:.2f}' for r in ratios)}) |")
PY
