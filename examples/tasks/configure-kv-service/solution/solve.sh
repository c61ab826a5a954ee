#!/bin/bash
cat > /app/kv.ini <<'INI'
[server]
bind = 127.0.0.1
port = 8091

[store]
data_file = /app/data/inventory.json
read_only = true

[auth]
token_file = /app/secrets/api_token
INI
cat /app/kv.ini
