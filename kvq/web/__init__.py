"""The HTTP layer shared by kvq-exporter and kvq-enforcer.

- `server`: an asyncio HTTP/1.1 server with per-connection deadlines, a connection limit that
  evicts the longest-idle connection, route/credential/size checks from the request head.
- `web_config`: `--web.config.file` in exporter-toolkit's format; `basic_auth`: bcrypt users.
- `gzip_cache`, `landing_page`, `standard_metrics`: gzip reused per body, the page at `/`,
  build info + process + connection metrics.
"""
