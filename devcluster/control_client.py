"""A small client for the devcluster control API (standard library only).

from devcluster.control_client import ControlClient
cc = ControlClient("http://127.0.0.1:19100")
cc.set_log_dir(0, 1, capacity_bytes=10_000_000, fill_bytes=9_000_000)
cc.set_faults(2, latency_ms=200)
cc.stop_broker(1)
cc.requests()["total"].get("AlterClientQuotas", 0)
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import quote


class ControlClientError(RuntimeError):
    """The control API refused a request (4xx) or failed (5xx), or could not be reached."""

    def __init__(self, status: int | None, message: str, method: str, url: str):
        where = f"{method} {url}"
        super().__init__(
            f"{where} -> {status}: {message}" if status else f"{where} failed: {message}"
        )
        self.status = status
        self.message = message


class ControlClient:
    def __init__(self, url: str, timeout: float = 30.0):
        self.url = url.rstrip("/")
        self.timeout = timeout

    # ---- endpoints --------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        return self._call("GET", "/state")

    def broker(self, broker_id: int) -> dict[str, Any]:
        return self._call("GET", f"/brokers/{broker_id}")

    def set_log_dir(self, broker: int, index: int, **fields: Any) -> dict[str, Any]:
        """Any of capacity_bytes, usable_bytes (None: unset), fill_bytes, clear=True,
        online=True."""
        return self._call("PUT", f"/brokers/{broker}/log-dirs/{index}", fields)

    def stop_broker(self, broker_id: int) -> dict[str, Any]:
        return self._call("POST", f"/brokers/{broker_id}/stop")

    def start_broker(self, broker_id: int) -> dict[str, Any]:
        return self._call("POST", f"/brokers/{broker_id}/start")

    def set_faults(self, broker_id: int, **faults: Any) -> dict[str, Any]:
        """Any of latency_ms, log_dir_error={"index": i, "code": 56},
        max_describe_log_dirs_version, fail_describe_log_dirs, leave_before_describe_log_dirs,
        drop_describe_log_dirs (a count),
        alter_client_quotas={"delay_ms": 6000, "error_code": 41, "entities": [...],
        "validate_only": False, "count": 1} (None removes it), quota_metadata_lag_ms,
        clear=True; returns the faults now
        active on that broker."""
        return self._call("PUT", f"/brokers/{broker_id}/faults", faults)

    def set_broker_config(self, broker_id: int, config: dict[str, str | None]) -> dict[str, str]:
        """Static broker configs, e.g. ``{"client.quota.callback.class": "a.B"}`` (None unsets);
        returns the configs set on that broker."""
        return self._call("PUT", f"/brokers/{broker_id}/config", config)

    def clear_faults(self, broker_id: int) -> dict[str, Any]:
        return self.set_faults(broker_id, clear=True)

    def acls(self) -> dict[str, list[str]] | None:
        return self._call("GET", "/acls")

    def set_acls(self, acls: dict[str, list[str]] | None) -> dict[str, list[str]] | None:
        """Replace the cluster ACLs, ``{"User:kvq": ["Describe"]}``; None: no authorizer."""
        if acls is None:
            return self._call("DELETE", "/acls")
        return self._call("PUT", "/acls", acls)

    def sasl_users(self) -> list[str]:
        return self._call("GET", "/sasl-users")

    def set_sasl_user(self, name: str, password: str) -> list[str]:
        return self._call("PUT", f"/sasl-users/{quote(name, safe='')}", {"password": password})

    def remove_sasl_user(self, name: str) -> list[str]:
        return self._call("DELETE", f"/sasl-users/{quote(name, safe='')}")

    def quotas(self) -> list[dict[str, Any]]:
        return self._call("GET", "/quotas")

    def requests(self) -> dict[str, Any]:
        return self._call("GET", "/requests")

    def reset_requests(self) -> dict[str, Any]:
        return self._call("DELETE", "/requests")

    # ---- transport --------------------------------------------------------------------------
    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        url = self.url + path
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, method=method)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            raise ControlClientError(exc.code, _error_text(exc), method, url) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ControlClientError(None, str(reason), method, url) from None


def _error_text(exc: urllib.error.HTTPError) -> str:
    raw = exc.read()
    try:
        return json.loads(raw)["error"]
    except (ValueError, KeyError, TypeError):
        return raw.decode(errors="replace").strip() or exc.reason
