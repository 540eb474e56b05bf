python - <<'PY'
import re
src = open("stats.py").read()
src = src.replace("    return ordered[middle]\n", "    if len(ordered) % 2:\n        return ordered[middle]\n    return (ordered[middle - 1] + ordered[middle]) / 2\n")
open("stats.py", "w").write(src)
PY
python test_stats.py
