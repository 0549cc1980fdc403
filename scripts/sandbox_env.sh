# Sourced (POSIX sh): kevo_sandbox_env BIN_DIR. kevo-worker refuses to start
# where bubblewrap cannot start a container (docs/security.md) unless told to
# run candidates under seccomp and rlimits alone. A script that must run there
# (a GPU host without bubblewrap, a container without user namespaces) says so
# on stderr and tells the workers it starts, through KEVO_ALLOW_WEAKER_SANDBOX.
kevo_sandbox_env() {
  if [ "${KEVO_ALLOW_WEAKER_SANDBOX:-}" = 1 ]; then return 0; fi
  if ! kevo_sandbox_why="$("$1/kevo-worker" --sandbox-check)"; then
    echo "note: ${kevo_sandbox_why#sandbox: }: the workers started here run candidates so" \
         "(KEVO_ALLOW_WEAKER_SANDBOX=1)" >&2
    export KEVO_ALLOW_WEAKER_SANDBOX=1
  fi
}
