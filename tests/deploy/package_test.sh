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
#   package_test.sh systemd  BINARY_DIR WORK   the package installed with `dpkg -i` on a booted
#                                              systemd (PID 1 of new namespaces, on a throwaway
#                                              overlay of /); `systemctl start` of both units,
#                                              `gpool nodes` lists the server, a user's job runs.
#
# The package is extracted with `dpkg-deb -x` into a temporary root; every absolute path of the
# units and configuration files (/usr, /etc, /run, /var) is rewritten into that root, so nothing
# outside it is touched. The systemd mode instead boots systemd in new pid/mount/uts/net/cgroup
# namespaces, chrooted into an overlay whose lower layer is / and whose upper layer is a tmpfs:
# what it writes (the installed package, users, /tmp cleaning) never reaches the host. Exit 77
# (ctest: skipped) when a needed tool is missing or systemd cannot boot here.
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

skip() {
  echo "SKIP: $*" >&2
  exit 77
}

pids=()
tmp_dir=""
# The systemd mode's booted namespace: the cgroups made for it (one per hierarchy), the unshare
# process and the namespace's PID 1 (host pids).
ns_cgroups=()
ns_unshare=""
ns_init=""
cleanup() {
  local pid d try
  # Killing PID 1 of a pid namespace kills all of it; killing unshare would not.
  if [ -n "$ns_init" ]; then kill -KILL "$ns_init" 2>/dev/null || true; fi
  if [ -n "$ns_unshare" ]; then
    kill -KILL "$ns_unshare" 2>/dev/null || true
    wait "$ns_unshare" 2>/dev/null || true
  fi
  # The cgroups systemd made below ours empty once the namespace's processes are reaped.
  for d in "${ns_cgroups[@]}"; do
    for try in $(seq 50); do
      find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true
      [ -d "$d" ] || break
      sleep 0.1
    done
    [ ! -d "$d" ] || echo "cleanup: could not remove the cgroup $d (try $try)" >&2
  done
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

# Prints this shell's cgroup directory in every mounted hierarchy (cgroup v1 and v2).
own_cgroups() {
  local ctrls path target fstype opts c matches
  while IFS=: read -r _ ctrls path; do
    while read -r target fstype opts; do
      if [ -z "$ctrls" ]; then
        [ "$fstype" = cgroup2 ] || continue
      else
        [ "$fstype" = cgroup ] || continue
        matches=1
        for c in ${ctrls//,/ }; do
          [[ ",$opts," == *",$c,"* ]] || matches=0
        done
        [ "$matches" -eq 1 ] || continue
      fi
      echo "$target${path%/}"
    done < <(findmnt -rn -t cgroup,cgroup2 -o TARGET,FSTYPE,OPTIONS)
  done </proc/self/cgroup
}

# Runs a command in the booted namespace, as root, in its root directory.
in_ns() {
  nsenter -t "$ns_init" -m -p -u -n -r -w "$@"
}

# Boots systemd as PID 1 of new pid, mount, uts, net and cgroup namespaces, chrooted into an
# overlay of / whose upper layer is a tmpfs; waits until `systemctl is-system-running` says
# running or degraded. Skips (77) when that cannot be done here.
#
# Why each part: the overlay keeps the host's files as they are (systemd's boot cleans /tmp and
# would start the host's services on the host's state); the net namespace keeps the booted
# services off the host's ports; the cgroup namespace, rooted in a new child of this shell's
# cgroup in every hierarchy, keeps systemd's cgroups under that child, never at a root.
boot_systemd() {
  local d state deadline ns_dirs ns_mounts=()
  [ "$(id -u)" -eq 0 ] || skip "booting systemd needs root"
  [ -x /lib/systemd/systemd ] || skip "no /lib/systemd/systemd"
  grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null ||
    skip "the kernel has no overlay filesystem"
  mapfile -t ns_dirs < <(own_cgroups)
  [ ${#ns_dirs[@]} -gt 0 ] || skip "no cgroup hierarchy is mounted"
  for d in "${ns_dirs[@]}"; do
    [ -d "$d" ] || skip "this shell's cgroup $d is not under its mount point"
    mkdir "$d/gpool-deploy-test.$$" 2>/dev/null || skip "cannot create a cgroup in $d"
    ns_cgroups+=("$d/gpool-deploy-test.$$")
    ns_mounts+=("$(basename "$(findmnt -rn -o TARGET -T "$d")")=$d/gpool-deploy-test.$$")
    # A new v1 cpuset has no CPUs and no memory nodes: no process could join it.
    if [ -f "$d/cpuset.cpus" ] && [ ! -f "$d/cgroup.subtree_control" ]; then
      cp "$d/cpuset.cpus" "$d/gpool-deploy-test.$$/cpuset.cpus"
      cp "$d/cpuset.mems" "$d/gpool-deploy-test.$$/cpuset.mems"
    fi
  done
  mkdir -p "$tmp_dir/root" "$tmp_dir/t"
  cat >"$tmp_dir/boot.sh" <<'BOOT'
set -e
cd "$1"
mount -t tmpfs -o mode=0755 gpool-deploy-test t
mkdir t/upper t/work
mount -t overlay overlay -o lowerdir=/,upperdir=t/upper,workdir=t/work root
# The cgroup hierarchies as the host mounts them, each rooted at the test's child cgroup.
# systemd keeps what is mounted already; left to itself it would mount its own set, and where
# the host splits controllers that systemd pairs (cpu and cpuacct) it would get no cpu at all.
shift
mount -t sysfs sysfs root/sys
mount -t tmpfs -o mode=0755,nosuid,nodev,noexec cgroup root/sys/fs/cgroup
for pair in "$@"; do
  mkdir root/sys/fs/cgroup/"${pair%%=*}"
  mount --bind "${pair#*=}" root/sys/fs/cgroup/"${pair%%=*}"
done
# The host's PostgreSQL is enabled in its multi-user.target: not wanted in here.
ln -sf /dev/null root/etc/systemd/system/postgresql.service
exec chroot root /usr/bin/env -i container=gpool-deploy-test \
  PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  /lib/systemd/systemd --log-target=console --show-status=no
BOOT
  (
    for d in "${ns_cgroups[@]}"; do echo "$BASHPID" >"$d/cgroup.procs"; done
    exec unshare --pid --fork --mount --uts --net --cgroup --propagation private \
      bash "$tmp_dir/boot.sh" "$tmp_dir" "${ns_mounts[@]}"
  ) >"$tmp_dir/boot.log" 2>&1 &
  ns_unshare=$!
  deadline=$((SECONDS + 30))
  while :; do
    ns_init=$(pgrep -P "$ns_unshare" || true)
    if [ -n "$ns_init" ] && [ "$(ps -o comm= -p "$ns_init" 2>/dev/null)" = systemd ]; then break; fi
    if ! kill -0 "$ns_unshare" 2>/dev/null || [ $SECONDS -ge $deadline ]; then
      ns_init=""
      cat "$tmp_dir/boot.log" >&2
      skip "systemd could not be started in new namespaces here"
    fi
    sleep 0.1
  done
  deadline=$((SECONDS + 120))
  while :; do
    state=$(in_ns systemctl is-system-running 2>/dev/null || true)
    case "$state" in
    running | degraded) break ;;
    esac
    if [ $SECONDS -ge $deadline ] || ! kill -0 "$ns_init" 2>/dev/null; then
      tail -n 40 "$tmp_dir/boot.log" >&2
      skip "systemd did not finish booting in 120 s (state: ${state:-none})"
    fi
    sleep 0.2
  done
  echo "systemd booted in the test's namespaces ($state) after $SECONDS s"
  if [ "$state" = degraded ]; then
    echo "failed units (the host's): $(in_ns systemctl --failed --plain --no-legend | cut -d' ' -f1 | tr '\n' ' ')"
  fi
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
    /usr/share/bash-completion/completions/gpool /usr/share/zsh/vendor-completions/_gpool
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
    grep -vE '^/usr/(bin|lib/gpool|lib/systemd/system|share/gpool|share/doc/gpool)/|^/etc/(gpool/gpoold\.toml|default/gpool-agent)$' |
    grep -vxE '/usr/share/(bash-completion/completions/gpool|zsh/vendor-completions/_gpool)' || true)
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
  # The packaged defaults enforce GPU slices (issue 20): /etc/default/gpool-agent preloads the
  # packaged interposer and the backstop is on; a package without the interposer (built without
  # the CUDA headers) makes a node that says it does not.
  if [ -f "$root/usr/lib/gpool/libgpool-vgpu.so" ]; then enforced=true; else enforced=false; fi
  grep -q "\"enforced\":$enforced" <<<"$nodes" ||
    fail "deploy-test-node should report slices enforced=$enforced: $nodes"
  echo "deploy-test-node reports slices enforced=$enforced"
  ;;

systemd)
  need dpkg-deb unshare nsenter findmnt pgrep setpriv
  deb=$(the_deb)
  tmp_dir=$(mktemp -d "${TMPDIR:-/tmp}/gpool-deploy.XXXXXX")
  boot_systemd
  in_ns sh -c 'cat >/root/gpool.deb' <"$deb"
  in_ns dpkg -i /root/gpool.deb >"$tmp_dir/dpkg.log" 2>&1 || {
    cat "$tmp_dir/dpkg.log" >&2
    fail "dpkg -i failed"
  }
  in_ns id gpool >/dev/null || fail "dpkg -i made no gpool user"
  for unit in gpoold gpool-agent; do
    [ "$(in_ns systemctl is-active "$unit" || true)" = inactive ] ||
      fail "$unit is running right after dpkg -i: the package must not start it"
  done
  # No GPU here: the agent reads a simulated server of 8 A100s.
  fixture=/usr/share/gpool/fixtures/8x-a100-sxm4-80gb-nvlink.json
  in_ns sed -i -E "s#^GPOOL_AGENT_ARGS=\"(.*)\"#GPOOL_AGENT_ARGS=\"\\1 --fake-fixture $fixture\"#" \
    /etc/default/gpool-agent
  in_ns grep -qF -- "--fake-fixture $fixture\"" /etc/default/gpool-agent ||
    fail "could not add --fake-fixture to /etc/default/gpool-agent"
  in_ns systemctl start gpoold.service gpool-agent.service || {
    in_ns journalctl --no-pager -n 60 -u gpoold -u gpool-agent >&2
    fail "systemctl start gpoold gpool-agent failed"
  }
  node=$(in_ns hostname)
  deadline=$((SECONDS + 60))
  while :; do
    nodes=$(in_ns gpool nodes 2>&1 || true)
    if grep -q "^$node " <<<"$nodes"; then break; fi
    if [ $SECONDS -ge $deadline ]; then
      in_ns systemctl status --no-pager gpoold gpool-agent >&2 || true
      in_ns journalctl --no-pager -n 80 -u gpoold -u gpool-agent >&2
      fail "gpool nodes does not list $node after 60 s: $nodes"
    fi
    sleep 0.2
  done
  echo "gpool nodes, inside:"
  echo "$nodes"
  grep "^$node " <<<"$nodes" | grep -qw IDLE || fail "$node is not IDLE: $nodes"
  # A plain local user's job, end to end: submitted over the socket, run by the agent as that
  # user on a GPU slice, its output streamed back.
  in_ns useradd --create-home gpooltest
  # A slice where the package holds it to its limits (the interposer), else a whole GPU.
  gpus=0.5
  in_ns test -f /usr/lib/gpool/libgpool-vgpu.so || gpus=1
  out=$(in_ns setpriv --reuid gpooltest --regid gpooltest --init-groups \
    env HOME=/home/gpooltest gpool run --gpus "$gpus" --time 5m -- \
    sh -c 'echo "job of $(id -un) on GPU $CUDA_VISIBLE_DEVICES"; cat /proc/self/cgroup' 2>&1) || {
    in_ns journalctl --no-pager -n 80 -u gpoold -u gpool-agent >&2
    job=$(sed -n 's/^gpool: job \([0-9]*\) submitted.*/\1/p' <<<"$out")
    if [ -n "$job" ]; then in_ns gpool show "$job" >&2 || true; fi
    fail "gpool run as gpooltest failed: $out"
  }
  grep -q "^job of gpooltest on GPU " <<<"$out" || fail "gpool run printed: $out"
  echo "gpool run as gpooltest: $(grep '^job of' <<<"$out")"
  # The agent, itself a service of this systemd, put the task in its own cgroups (CPU and
  # memory limits); the paths are as the booted systemd's cgroup namespace sees them.
  for ctrl in cpu memory; do
    grep -qE "^[0-9]+:([a-z,]*,)?$ctrl(,[a-z,]*)?:/gpool/" <<<"$out" ||
      grep -qE '^0::/gpool/' <<<"$out" ||
      fail "the task is not in a gpool $ctrl cgroup: $(grep -v '^job of' <<<"$out")"
  done
  echo "its cgroups: $(grep -E ':(cpu|memory):|^0::' <<<"$out" | tr '\n' ' ')"
  for unit in gpoold gpool-agent; do
    [ "$(in_ns systemctl is-active "$unit" || true)" = active ] || fail "$unit is not active at the end"
  done
  # The completion script where bash-completion looks for it by the command's name.
  completion=$(in_ns bash -c '. /usr/share/bash-completion/completions/gpool && complete -p gpool') ||
    fail "the installed bash completion does not load: $completion"
  grep -q ' gpool$' <<<"$completion" || fail "bash completion for gpool not registered: $completion"
  echo "bash completion: $completion"
  ;;

*)
  fail "unknown mode $mode"
  ;;
esac
