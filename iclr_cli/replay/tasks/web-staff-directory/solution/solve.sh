python - <<'PY'
import re, urllib.request
rows, url = [], "{url}/staff/1"
while url:
    html = urllib.request.urlopen(url).read().decode()
    rows += re.findall(r"<tr><td>([^<]+)</td><td>([^<]+)</td><td><a href='mailto:[^']+'>([^<]+)</a>", html)
    nxt = re.search(r"href='(/staff/\d+)'>Next", html)
    url = "{url}" + nxt.group(1) if nxt else None
with open("research.csv", "w") as f:
    f.write("name,email\n")
    for name, dept, mail in rows:
        if dept == "Research":
            f.write(f"{name},{mail}\n")
PY
cat research.csv
