"""Reward: 0.1 for the header, 0.9 shared by the rows (a row counts when all four cells
are right); 0 when customers_clean.csv is missing."""

from iclr_cli.replay.checks import read_csv

EXPECTED = [
    ["1", "Ines Duarte", "Lisbon", "2024-03-05"],
    ["2", "Kofi Mensah", "Accra", "2024-03-07"],
    ["3", "Sara Lind", "Uppsala", "2024-03-05"],
    ["4", "Ravi Kumar", "Pune", "2024-03-09"],
    ["5", "Mei Tanaka", "Osaka", "2023-11-02"],
    ["6", "Jonas Weber", "Graz", "2023-12-31"],
    ["7", "Olga Petrova", "Riga", "2024-01-17"],
    ["8", "Luis Ortega", "Quito", "2023-08-01"],
]


def check(ctx):
    rows = read_csv(ctx.workspace / "customers_clean.csv")
    if not rows:
        return 0.0
    score = 0.1 if rows[0] == ["id", "name", "city", "signup_date"] else 0.0
    body = rows[1:] if score else rows
    score += 0.9 * sum(1 for want, got in zip(EXPECTED, body) if want == got) / len(EXPECTED)
    return round(score, 6)
