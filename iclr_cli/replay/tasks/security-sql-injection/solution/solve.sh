grep -n "LIKE '%\" + term" app/*.py
printf '{"file": "app/products.py", "line": 19, "cwe": "CWE-89"}\n' > report.json
