cat > action_items.json <<'JSON'
[
  {"owner": "Marco", "task": "prepare the release checklist", "due": "2024-05-20"},
  {"owner": "Priya", "task": "profile the export pipeline and report back", "due": "2024-05-15"},
  {"owner": "Lena", "task": "draft the job posting", "due": "2024-05-10"},
  {"owner": "Tom", "task": "book the venue for the team offsite", "due": "2024-05-24"}
]
JSON
