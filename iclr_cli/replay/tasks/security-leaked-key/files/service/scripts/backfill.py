"""One-off backfill of March invoices (run by hand)."""

import boto3

REGION = "eu-central-1"


def client():
    # TODO remove before release
    return boto3.client(
        "s3",
        region_name=REGION,
        aws_access_key_id="__KEY_ID__",
        aws_secret_access_key="__SECRET__",
    )


def backfill(month="2024-03"):
    s3 = client()
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket="acme-invoices", Prefix=month):
        for obj in page.get("Contents", []):
            print(obj["Key"])
