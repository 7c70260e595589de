# `make help`'s lines about the images, read from images/matrix.toml without the venv (a plain
# `make` on a fresh clone prints them): the title names the backends and families the matrix has,
# "Variants:" the ids that can be built, "Retired:" the old ids with their replacement (issue 45:
# the help said "TensorFlow + Keras" and listed retired ids as if they could be built).
# Usage: awk -v what=title|variants|retired -f scripts/help-matrix.awk images/matrix.toml
BEGIN { FS = "\"" ; name["tensorflow"] = "TensorFlow"; name["jax"] = "JAX"; name["torch"] = "PyTorch"
        name["cpu"] = "CPU"; name["cuda"] = "CUDA"; name["rocm"] = "ROCm" }
/^\[\[variant\]\]/ { table = "variant"; next }
/^\[\[retired\]\]/ { table = "retired"; next }
/^\[\[?[a-z_]+\]\]?/ && $0 !~ /^\[variant\./ { table = "" }
table == "variant" && /^id = /       { variants = variants (variants ? " " : "") $2 }
table == "variant" && /^backend = /  { if (!($2 in seen)) { seen[$2]; backends[++nb] = $2 } }
table == "variant" && /^family = /   { if (!(("f:" $2) in seen)) { seen["f:" $2]; families[++nf] = $2 } }
table == "retired" && /^id = /       { old = $2 }
table == "retired" && /^replaced_by = / { retired = retired (retired ? ", " : "") old " (now " $2 ")" }
function listed(items, n,    i, s) {
  for (i = 1; i <= n; i++) s = s (i == 1 ? "" : (i == n ? " and " : ", ")) (items[i] in name ? name[items[i]] : items[i])
  return s
}
END {
  if (what == "title") print "kerasenv: Keras images on " listed(backends, nb) " (" listed(families, nf) ") that prove they work on your GPU"
  else if (what == "variants") print "Variants: " variants
  else if (what == "retired" && retired) print "Retired (kerasenv names the replacement): " retired
}
