# Sourced by tools/setup.sh and tools/test.sh: installs the Debian/Ubuntu packages ember
# needs, with apt when root or with sudo; otherwise prints the exact apt line and stops.
EMBER_APT_PACKAGES=(cmake g++ make ninja-build ccache libeigen3-dev libgtest-dev libbenchmark-dev nlohmann-json3-dev zlib1g-dev libcli11-dev
  clang libclang-rt-dev libopenmpi-dev openmpi-bin libxml2-utils procps)

ember_ensure_deps() {
  local missing=()
  for p in "${EMBER_APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local apt="apt-get install -y --no-install-recommends ${missing[*]}"
  if [ "$(id -u)" -eq 0 ]; then
    echo "ember: installing ${missing[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive $apt
  elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    echo "ember: installing ${missing[*]} with sudo"
    sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive $apt
  else
    echo "ember: missing packages. Run this, then try again:"
    echo "    sudo apt-get update && sudo $apt"
    exit 1
  fi
}
