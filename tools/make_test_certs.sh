#!/usr/bin/env bash
# Makes a throwaway certificate authority and a server certificate for TLS tests and
# local experiments (docs/security.md):
#   tools/make_test_certs.sh DIR [SERVER_NAME]
# writes DIR/{ca.pem, ca.key, server.pem, server.key, token}. The server certificate is
# issued for SERVER_NAME (default "p3-server"), 127.0.0.1 and localhost.
set -euo pipefail
dir=${1:?usage: make_test_certs.sh DIR [SERVER_NAME]}
name=${2:-p3-server}
mkdir -p "$dir"
cd "$dir"
openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=p3 test CA" \
  -keyout ca.key -out ca.pem 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=$name" -keyout server.key -out server.csr 2>/dev/null
printf 'subjectAltName=DNS:%s,DNS:localhost,IP:127.0.0.1\n' "$name" > server.ext
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 30 \
  -extfile server.ext -out server.pem 2>/dev/null
rm -f server.csr server.ext ca.srl
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > token
chmod 600 ca.key server.key token
echo "make_test_certs: wrote $dir/{ca.pem,server.pem,server.key,token} for \"$name\""
