#!/usr/bin/env bash
# The shell completion scripts (scripts/completion/) against the real `gpool`:
#   bash: sources gpool.bash and calls its _gpool function the way bash does (COMP_WORDS,
#         COMP_CWORD), checking every subcommand `gpool --help` lists, flags and values.
#   zsh:  checks every subcommand is in _gpool's list, then drives an interactive `zsh -f` in a
#         tmux pane with compinit loading _gpool and checks what Tab completes. Exits 77 (CTest's
#         skip) when zsh or tmux is not installed.
#
# usage: completion_test.sh bash|zsh SOURCE_DIR GPOOL_BINARY
set -uo pipefail

shell_kind=$1
source_dir=$2
gpool_bin=$3
completion_dir=$source_dir/scripts/completion

subcommands=$("$gpool_bin" --help | awk '/^Subcommands:/ { s = 1; next } s && NF { print $1 }')
if [ -z "$subcommands" ]; then
  echo "completion_test: no subcommands in '$gpool_bin --help'" >&2
  exit 1
fi

failures=0
fail() {
  echo "completion_test ($shell_kind): FAILED: $*" >&2
  failures=$((failures + 1))
}

# ---------------------------------------------------------------- bash
if [ "$shell_kind" = bash ]; then
  # shellcheck source=/dev/null
  source "$completion_dir/gpool.bash"
  # What bash would offer for the words given, the last one being completed.
  complete_words() {
    COMP_WORDS=("$@")
    COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
    COMPREPLY=()
    _gpool
    printf '%s\n' "${COMPREPLY[@]}"
  }
  offers() {  # offers WANTED WORDS...: WANTED is among the completions of WORDS
    local wanted=$1 got
    shift
    # Captured first: with pipefail, `grep -q` closing the pipe early would fail the producer.
    got=$(complete_words "$@")
    grep -qxF -- "$wanted" <<<"$got" ||
      fail "'$*<Tab>' does not offer '$wanted' (offers: $(tr '\n' ' ' <<<"$got"))"
  }
  for command in $subcommands; do
    offers "$command" gpool ""
  done
  offers queue gpool qu
  offers --state gpool queue --st
  offers --gpus gpool submit --gp
  offers admin gpool user add alice --role ""
  offers group gpool usage --by ""
  offers --reason gpool drain gpu-01 --re
  offers revoke gpool token ""
  offers --expires-in gpool token create --exp
  offers --reusable gpool --server ctl:6443 join-token create --reu
  offers --token-file gpool --tok
  [ "$(complete_words gpool zzz-no-such | wc -w)" -eq 0 ] ||
    fail "'gpool zzz-no-such<Tab>' offers something"
  [ "$failures" -eq 0 ] && echo "completion_test (bash): every check passed"
  exit $((failures > 0))
fi

# ---------------------------------------------------------------- zsh
if [ "$shell_kind" != zsh ]; then
  echo "usage: completion_test.sh bash|zsh SOURCE_DIR GPOOL_BINARY" >&2
  exit 2
fi
for tool in zsh tmux; do
  if ! command -v "$tool" >/dev/null; then
    echo "completion_test (zsh): $tool is not installed; skipped"
    exit 77
  fi
done

# Every subcommand is in the `commands=( 'name:description' ... )` list of _gpool.
listed=$(awk '/^  commands=\(/ { s = 1; next } s && /^  \)/ { exit }
              s { sub(/^ *'"'"'/, ""); sub(/:.*/, ""); print }' "$completion_dir/_gpool")
for command in $subcommands; do
  grep -qxF "$command" <<<"$listed" || fail "_gpool does not list the subcommand '$command'"
done

work=$(mktemp -d /tmp/gpool-compl-XXXXXX)
tmux_cmd=(tmux -L "gpool-compl-$$" -f /dev/null)
cleanup() {
  "${tmux_cmd[@]}" kill-server 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

"${tmux_cmd[@]}" new-session -d -s compl -x 160 -y 40 \
  "env -i HOME=$work TERM=xterm PATH=/usr/bin:/bin zsh -f" || {
  echo "completion_test (zsh): cannot start tmux" >&2
  exit 1
}
send() { "${tmux_cmd[@]}" send-keys -t compl "$@"; }
screen() { "${tmux_cmd[@]}" capture-pane -p -t compl; }
# Polls the pane (at most 10 s) until it shows a line matching the extended regex.
wait_for() {
  local deadline=$((SECONDS + 10))
  while [ "$SECONDS" -lt "$deadline" ]; do
    local shown
    shown=$(screen)
    if grep -qE -- "$1" <<<"$shown"; then return 0; fi
    sleep 0.1
  done
  return 1
}

send "fpath=($completion_dir \$fpath); autoload -Uz compinit; compinit -u -D; PS1='zsh> '" Enter
send "print ready-\$((6*7))" Enter
wait_for '^ready-42' || fail "zsh did not start in tmux: $(screen)"

# tab_completes TYPED EXPECTED: typing TYPED then Tab leaves the line EXPECTED (capture-pane
# drops the trailing space zsh adds after a completed word).
tab_completes() {
  send C-u
  send -l "$1"
  send Tab
  wait_for "^zsh> $2\$" || fail "'$1<Tab>' did not become '$2'; the pane shows:
$(screen)"
  send C-u
}
tab_completes "gpool dra" "gpool drain"
tab_completes "gpool user a" "gpool user add"
tab_completes "gpool queue --sta" "gpool queue --state"
tab_completes "gpool usage --by g" "gpool usage --by group"
tab_completes "gpool join-token c" "gpool join-token create"
tab_completes "gpool token create --exp" "gpool token create --expires-in"
tab_completes "gpool join-token create --reu" "gpool join-token create --reusable"
tab_completes "gpool --token-f" "gpool --token-file"

[ "$failures" -eq 0 ] && echo "completion_test (zsh): every check passed"
exit $((failures > 0))
