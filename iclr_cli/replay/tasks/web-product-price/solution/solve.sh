curl -s {url}/category/tools
curl -s {url}/product/1042
