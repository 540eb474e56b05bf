ip=$(grep "Failed password" auth.log | sed -E 's/.* from ([0-9.]+) .*/\1/' | sort | uniq -c | sort -rn | head -1 | awk '{print $2}')
n=$(grep "Failed password" auth.log | grep -c " from $ip ")
user=$(grep "Accepted password" auth.log | grep " from $ip " | sed -E 's/.*Accepted password for ([^ ]+) .*/\1/')
printf '{"ip": "%s", "user": "%s", "failed_attempts": %s}\n' "$ip" "$user" "$n" > report.json
cat report.json
