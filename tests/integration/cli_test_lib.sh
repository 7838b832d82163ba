# What every shell test of the kiln command starts with (sourced, after
# `set -u`): $kiln, the command as built; $models, KILN_MODELS_DIR;
# $tmp, a scratch folder removed on exit; fail MESSAGE, which exits 1; and
# a skip (77) when stories260K.gguf, the model they all use, is absent.
kiln="$KILN_BUILDDIR/cli/kiln"
models="${KILN_MODELS_DIR:-}"
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
if [ ! -f "$models/stories260K.gguf" ]; then
  echo "SKIP: stories260K.gguf not in KILN_MODELS_DIR ($models)"; exit 77
fi
