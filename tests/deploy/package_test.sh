#!/usr/bin/env bash
# The Debian package, end to end (cmake/GpoolInstall.cmake, deploy/, docs/admin-guide.md).
#
#   package_test.sh build    BINARY_DIR WORK   cpack from the build tree -> WORK/gpool_*.deb
#   package_test.sh contents BINARY_DIR WORK   its file list, control data, maintainer scripts,
#                                              and `systemd-analyze verify` of its units
#   package_test.sh services BINARY_DIR WORK   gpoold started from the extracted package with its
#                                              unit's ExecStart answers over its socket
#   package_test.sh node     BINARY_DIR WORK   gpoold and gpool-agent (simulated GPUs) started as
#                                              their units do; GET /v1/nodes lists the server.
#                                              Needs gpoold's /v1/agent (the agent link).
#
# The package is extracted with `dpkg-deb -x` into a temporary root; every absolute path of the
# units and configuration files (/usr, /etc, /run, /var) is rewritten into that root, so nothing
# outside it is touched. Exit 77 (ctest: skipped) when a needed tool is missing.
set -euo pipefail

mode=$1
bin_dir=$2
work=$3
deb_glob="$work/gpool_*.deb"

fail() {
  echo "FAIL: $*" >&2
  exit 1
}
need() {
  for tool in "$@"; do
    command -v "$tool" >/dev/null || {
      echo "SKIP: $tool is not installed" >&2
      exit 77
    }
  done
}

the_deb() {
  local debs=($deb_glob)
  [ -f "${debs[0]}" ] || fail "no package in $work (the deploy_package_build test makes it)"
  [ ${#debs[@]} -eq 1 ] || fail "more than one package in $work: ${debs[*]}"
  echo "${debs[0]}"
}

# Extracts the package into a new temporary root and prints its path.
extract() {
  local tmp
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpool-deploy.XXXXXX")
  mkdir -p "$tmp/root"
  dpkg-deb -x "$(the_deb)" "$tmp/root"
  echo "$tmp"
}

# Rewrites absolute /usr, /etc, /run and /var paths into $1 (stdin to stdout).
reroot() {
  sed -E "s#(^|[ =\"'])/(usr|etc|run|var)/#\\1$1/\\2/#g"
}

unit_value() {  # unit_value FILE KEY: the (last) value of KEY= in a unit file
  sed -n "s/^$2=//p" "$1" | tail -n 1
}

# Creates the directories a unit's StateDirectory/RuntimeDirectory/LogsDirectory name, as
# systemd would, under the root $1.
unit_dirs() {
  local root=$1 unit=$2 d
  for d in $(unit_value "$unit" StateDirectory); do mkdir -p "$root/var/lib/$d"; done
  for d in $(unit_value "$unit" RuntimeDirectory); do mkdir -p "$root/run/$d"; done
  for d in $(unit_value "$unit" LogsDirectory); do mkdir -p "$root/var/log/$d"; done
}

pids=()
tmp_dir=""
cleanup() {
  local pid
  for pid in "${pids[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${pids[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  if [ -n "$tmp_dir" ]; then rm -rf "$tmp_dir"; fi
}
trap cleanup EXIT

# Starts gpoold from the extracted tree with its unit's ExecStart (rerooted), its configuration
# rerooted too; waits for its "ready" line. Sets `sock`.
start_gpoold() {
  local root=$1 unit="$1/usr/lib/systemd/system/gpoold.service" exec_start conf
  exec_start=$(unit_value "$unit" ExecStart | reroot "$root")
  [ -n "$exec_start" ] || fail "gpoold.service has no ExecStart"
  unit_dirs "$root" "$unit"
  conf="$root/etc/gpool/gpoold.toml"
  [ -f "$conf" ] || fail "the package has no /etc/gpool/gpoold.toml"
  reroot "$root" <"$conf" >"$conf.rerooted" && mv "$conf.rerooted" "$conf"
  sock=$(sed -n 's/^socket *= *"\(.*\)".*/\1/p' "$conf")
  [ -n "$sock" ] || fail "gpoold.toml sets no socket"
  mkfifo "$tmp_dir/gpoold.out"
  # shellcheck disable=SC2086 # ExecStart's words, as systemd splits them
  $exec_start >"$tmp_dir/gpoold.out" 2>"$tmp_dir/gpoold.log" &
  pids+=($!)
  local line=""
  read -r -t 60 line <"$tmp_dir/gpoold.out" || true
  if [ "$line" != "ready" ]; then
    cat "$tmp_dir/gpoold.log" >&2
    fail "gpoold ($exec_start) did not print ready"
  fi
  echo "gpoold started: $exec_start"
}

api_get() {  # api_get PATH: the body; fails on a non-2xx answer
  curl -sS --fail-with-body --max-time 10 --unix-socket "$sock" "http://gpool$1"
}

case "$mode" in
build)
  need cpack dpkg-deb fakeroot
  rm -rf "$work"
  mkdir -p "$work"
  start=$(date +%s)
  cpack --config "$bin_dir/CPackConfig.cmake" -B "$work" >"$work/cpack.log" 2>&1 || {
    cat "$work/cpack.log" >&2
    fail "cpack failed"
  }
  deb=$(the_deb)
  echo "built $deb ($(du -k "$deb" | cut -f1) KiB) in $(($(date +%s) - start)) s"
  ;;

contents)
  need dpkg-deb
  deb=$(the_deb)
  files=$(dpkg-deb -c "$deb" | awk '{print $6}' | sed 's#^\./#/#')
  expect=(
    /usr/bin/gpoold /usr/bin/gpool /usr/bin/gpool-agent /usr/bin/gpool-supervisor
    /usr/bin/gpool-gpu-probe
    /usr/lib/systemd/system/gpoold.service /usr/lib/systemd/system/gpool-agent.service
    /etc/gpool/gpoold.toml /etc/default/gpool-agent
    /usr/share/gpool/examples/gpoold.toml /usr/share/gpool/examples/gpool-agent.default
    /usr/share/gpool/examples/gpool-agent.toml
    /usr/share/gpool/traces/pollux-osdi21/philly.csv
    /usr/share/gpool/web/index.html /usr/share/gpool/web/app.js /usr/share/gpool/web/api.js
    /usr/share/gpool/traces/alibaba-gpu-v2023/openb_pod_list_default.csv
    /usr/share/doc/gpool/README.md /usr/share/doc/gpool/admin-guide.md
  )
  src_dir=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$bin_dir/CMakeCache.txt")
  for fixture in "$src_dir"/src/gpu/fixtures/*.json; do
    expect+=("/usr/share/gpool/fixtures/$(basename "$fixture")")
  done
  if [ -f "$bin_dir/src/vgpu/libgpool-vgpu.so" ]; then
    expect+=(/usr/lib/gpool/libgpool-vgpu.so)
  fi
  for f in "${expect[@]}"; do
    grep -qxF "$f" <<<"$files" || fail "the package lacks $f"
  done
  # Nothing else: no headers, static libraries, test or bench programs, nothing outside
  # /usr and /etc.
  stray=$(grep -vE '/$' <<<"$files" |
    grep -vE '^/usr/(bin|lib/gpool|lib/systemd/system|share/gpool|share/doc/gpool)/|^/etc/(gpool/gpoold\.toml|default/gpool-agent)$' || true)
  [ -z "$stray" ] || fail "unexpected files in the package: $stray"
  bins=$(grep -c '^/usr/bin/.' <<<"$files")
  [ "$bins" -eq 5 ] || fail "expected 5 programs in /usr/bin, found $bins"

  # Control data.
  [ "$(dpkg-deb -f "$deb" Package)" = gpool ] || fail "Package is not gpool"
  version=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$bin_dir/CMakeCache.txt")
  [ "$(dpkg-deb -f "$deb" Version)" = "$version" ] || fail "Version is not $version"
  [ "$(dpkg-deb -f "$deb" Architecture)" = "$(dpkg --print-architecture)" ] ||
    fail "Architecture is not $(dpkg --print-architecture)"
  depends=$(dpkg-deb -f "$deb" Depends)
  dep_names=$(tr ',' '\n' <<<"$depends" | sed -e 's/^ *//' -e 's/ .*//')
  for dep in adduser libc6 libstdc++6 libsqlite3-0 libpq5 libssl3; do
    grep -qxF "$dep" <<<"$dep_names" || fail "Depends lacks $dep: $depends"
  done
  ctl=$(mktemp -d "${TMPDIR:-/tmp}/gpool-deploy.XXXXXX")
  tmp_dir=$ctl
  dpkg-deb -e "$deb" "$ctl/DEBIAN"
  for script in postinst prerm postrm; do
    [ -x "$ctl/DEBIAN/$script" ] || fail "no executable $script"
    sh -n "$ctl/DEBIAN/$script" || fail "$script is not valid sh"
  done
  grep -q 'adduser --system' "$ctl/DEBIAN/postinst" || fail "postinst creates no gpool user"
  if grep -qE 'systemctl .*(enable|start)|deb-systemd-helper' "$ctl/DEBIAN/postinst"; then
    fail "postinst enables or starts a service"
  fi
  [ "$(sort "$ctl/DEBIAN/conffiles")" = "$(printf '/etc/default/gpool-agent\n/etc/gpool/gpoold.toml')" ] ||
    fail "conffiles: $(cat "$ctl/DEBIAN/conffiles")"
  # The agent's unit keeps the tasks' supervisors when it stops (design requirement).
  root_dir="$ctl/root"
  mkdir -p "$root_dir"
  dpkg-deb -x "$deb" "$root_dir"
  agent_unit="$root_dir/usr/lib/systemd/system/gpool-agent.service"
  [ "$(unit_value "$agent_unit" KillMode)" = process ] || fail "gpool-agent.service: KillMode is not process"
  [ "$(unit_value "$agent_unit" RuntimeDirectoryPreserve)" = yes ] ||
    fail "gpool-agent.service: the vgpu regions would be deleted on stop"
  # The programs the units and `gpool up` start, beside each other.
  for exe in $(unit_value "$root_dir/usr/lib/systemd/system/gpoold.service" ExecStart | cut -d' ' -f1) \
    $(unit_value "$agent_unit" ExecStart | cut -d' ' -f1); do
    [ -x "$root_dir$exe" ] || fail "ExecStart $exe is not in the package"
  done

  # systemd-analyze verify, where it works in this environment: a trivial unit must verify
  # first, otherwise (no systemd, no --root support) this part is skipped. The roots get the
  # host's units (targets the units name), never replacing the package's.
  host_units=/usr/lib/systemd/system
  [ -d "$host_units" ] || host_units=/lib/systemd/system
  if command -v systemd-analyze >/dev/null && [ -d "$host_units" ]; then
    probe="$ctl/probe"
    mkdir -p "$probe/usr/lib/systemd/system" "$probe/usr/bin"
    cp -a "$host_units/." "$probe/usr/lib/systemd/system/"
    cp -an "$host_units/." "$root_dir/usr/lib/systemd/system/"
    cp /bin/true "$probe/usr/bin/probe-true"
    printf '[Unit]\nDescription=probe\n[Service]\nExecStart=/usr/bin/probe-true\n' \
      >"$probe/usr/lib/systemd/system/gpool-probe.service"
    if systemd-analyze verify --root="$probe" gpool-probe.service >"$ctl/probe.log" 2>&1 &&
      [ ! -s "$ctl/probe.log" ]; then
      # The gpool user the units name exists only after postinst.
      out=$(systemd-analyze verify --root="$root_dir" gpoold.service gpool-agent.service 2>&1 || true)
      out=$(grep -v -e "Failed to resolve user 'gpool'" -e "Failed to resolve group 'gpool'" <<<"$out" || true)
      [ -z "$out" ] || fail "systemd-analyze verify: $out"
      echo "systemd-analyze verify: both units clean"
    else
      echo "systemd-analyze verify does not work here; skipped ($(head -n 2 "$ctl/probe.log"))"
    fi
  fi
  echo "contents: $(grep -vc '/$' <<<"$files") files, Depends: $depends"
  ;;

services)
  need dpkg-deb curl
  tmp_dir=$(extract)
  root="$tmp_dir/root"
  start_gpoold "$root"
  health=$(api_get /v1/health) || fail "GET /v1/health: $health"
  nodes=$(api_get /v1/nodes) || fail "GET /v1/nodes: $nodes"
  [ "$nodes" = '{"nodes":[]}' ] || fail "a new store lists nodes: $nodes"
  echo "gpoold from the package answers on $sock: $health"
  ;;

node)
  need dpkg-deb curl
  tmp_dir=$(extract)
  root="$tmp_dir/root"
  start_gpoold "$root"
  unit="$root/usr/lib/systemd/system/gpool-agent.service"
  env_file="$root/etc/default/gpool-agent"
  [ -f "$env_file" ] || fail "the package has no /etc/default/gpool-agent"
  fixture="$root/usr/share/gpool/fixtures/8x-a100-sxm4-80gb-nvlink.json"
  [ -f "$fixture" ] || fail "the package has no $(basename "$fixture")"
  gpus=8  # 8x A100 SXM4
  unit_dirs "$root" "$unit"
  exec_start=$(unit_value "$unit" ExecStart | reroot "$root")
  (
    # As systemd: Environment=, then the EnvironmentFile, then ExecStart with ${VAR} as one
    # word and $VAR split at white space.
    GPOOL_NODE=deploy-test-node
    # shellcheck disable=SC1090
    . <(reroot "$root" <"$env_file")
    GPOOL_NODE=deploy-test-node
    GPOOL_AGENT_ARGS="$GPOOL_AGENT_ARGS --fake-fixture $fixture --no-cgroups"
    eval "exec $exec_start"
  ) >"$tmp_dir/agent.log" 2>&1 &
  pids+=($!)
  echo "gpool-agent started: $exec_start"
  # The agent's hello reaches gpoold asynchronously: poll the API (up to 30 s).
  deadline=$(($(date +%s) + 30))
  nodes=""
  while :; do
    nodes=$(api_get /v1/nodes || true)
    if grep -q '"name":"deploy-test-node"' <<<"$nodes"; then break; fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
      echo "--- gpoold" >&2
      cat "$tmp_dir/gpoold.log" >&2
      echo "--- gpool-agent" >&2
      cat "$tmp_dir/agent.log" >&2
      fail "GET /v1/nodes does not list deploy-test-node after 30 s: $nodes"
    fi
    kill -0 "${pids[1]}" 2>/dev/null || {
      cat "$tmp_dir/agent.log" >&2
      fail "gpool-agent exited"
    }
    sleep 0.2
  done
  grep -q '"state":"IDLE"' <<<"$nodes" || fail "deploy-test-node is not IDLE: $nodes"
  listed=$(grep -o '"uuid"' <<<"$nodes" | wc -l)
  [ "$listed" -eq "$gpus" ] || fail "deploy-test-node lists $listed GPUs, the fixture has $gpus"
  echo "GET /v1/nodes lists deploy-test-node, IDLE, with $listed GPUs"
  ;;

*)
  fail "unknown mode $mode"
  ;;
esac
