python - <<'PY'
import csv
from datetime import datetime
FORMATS = ["%Y-%m-%d", "%m/%d/%Y", "%d %B %Y", "%B %d, %Y"]
def iso(s):
    for f in FORMATS:
        try:
            return datetime.strptime(s, f).strftime("%Y-%m-%d")
        except ValueError:
            pass
    raise ValueError(s)
rows = list(csv.DictReader(open("customers.csv")))
with open("customers_clean.csv", "w", newline="") as f:
    w = csv.DictWriter(f, ["id", "name", "city", "signup_date"])
    w.writeheader()
    for r in rows:
        r["signup_date"] = iso(r["signup_date"])
        w.writerow(r)
PY
cat customers_clean.csv
