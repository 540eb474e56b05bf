token=$(curl -s {url}/contact | sed -nE 's/.*name="token" value="([0-9a-f]+)".*/\1/p')
curl -s -X POST {url}/contact --data-urlencode "token=$token" --data-urlencode "name=Ada Lovelace" --data-urlencode "email=ada@example.org" --data-urlencode "topic=billing" --data-urlencode "message=Hello, I have a question about invoice INV-2041."
