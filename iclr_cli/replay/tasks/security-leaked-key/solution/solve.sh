key=$(grep -rhoE "AKIA[0-9A-Z]{16}" service | grep -v EXAMPLE | head -1)
line=$(grep -n "$key" service/scripts/backfill.py | cut -d: -f1)
printf '{"file": "service/scripts/backfill.py", "line": %s, "key_id": "%s"}\n' "$line" "$key" > report.json
cat report.json
