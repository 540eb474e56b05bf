python - <<'PY'
import csv
from collections import defaultdict
t = defaultdict(float)
for r in csv.DictReader(open("sales.csv")):
    t[r["region"]] += float(r["amount"])
with open("totals.csv", "w") as f:
    f.write("region,total\n")
    for k in sorted(t):
        f.write(f"{k},{t[k]:.2f}\n")
PY
cat totals.csv
