"""The domain's refusal: a SPEC error code and the HTTP status the gateway answers with."""

from __future__ import annotations


class ApprovalError(Exception):
    """A refused request, with the SPEC error code and the HTTP status the gateway answers with."""

    def __init__(self, code: str, http_status: int, message: str):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.http_status = http_status
        self.message = message
