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

# The GGUF converters' venv: bert_gguf.sh, embeddinggemma.sh and nomic.sh make their files in it (and
# sentence_transformers.sh runs it), so its tools are pinned here, once. Sourced after CACHE is set.
GGUF_VENV="$CACHE/gguf-venv"
GGUF_TOOLS="gguf==0.19.0 numpy==2.4.6 safetensors==0.8.0 sentencepiece==0.2.3"

# gguf_convert OUT WHAT SCRIPT ARGS...: SCRIPT (one of scripts/lib's converters, which write through gguf_write.py)
# run with ARGS in the GGUF venv to make OUT, saying WHAT, unless OUT's marker (OUT.converted) shows it was made by
# these tools and scripts as they are now.
gguf_convert() {
  local out="$1" what="$2" script="$3" stamp
  shift 3
  stamp="$GGUF_TOOLS $(cat "$script" "$(dirname "${BASH_SOURCE[0]}")/gguf_write.py" | sha256sum | cut -d' ' -f1)"
  if [ -f "$out" ] && [ "$(cat "$out.converted" 2>/dev/null)" = "$stamp" ]; then
    return 0
  fi
  # shellcheck disable=SC2086
  venv_with "$GGUF_VENV" "gguf, numpy, safetensors, sentencepiece" "the GGUF converter's tools" $GGUF_TOOLS
  echo "setup: $what" >&2
  "$GGUF_VENV/bin/python" "$script" "$@"
  echo "$stamp" > "$out.converted"
}
