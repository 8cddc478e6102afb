# Virtualenvs of the setup steps, sourced by scripts/setup.d/*.sh.

# fresh_venv VENV WHAT PIP-ARGS...: VENV made afresh (what was there removed) with PIP-ARGS installed.
fresh_venv() {
  local venv="$1" what="$2"
  shift 2
  echo "setup: installing $what into $venv" >&2
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$@"
}

# venv_with VENV IMPORTS WHAT PIP-ARGS...: VENV as it is when its python imports IMPORTS ("a, b"), else made afresh
# with PIP-ARGS.
venv_with() {
  local venv="$1" imports="$2"
  shift 2
  "$venv/bin/python" -c "import $imports" 2>/dev/null || fresh_venv "$venv" "$@"
}
