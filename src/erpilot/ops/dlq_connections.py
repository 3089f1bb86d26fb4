"""The connections of `erpilot dlq`: one as ``ERPILOT_NATS_USER`` (or none, on an open NATS) to read,
and with the least-privilege users, one per user a replay must publish as (see ``dlq``).

Passwords come from ``ERPILOT_NATS_<USER>_PASSWORD`` or, for `erpilot up --secure`, from
``$ERPILOT_DATA_DIR/nats-passwords.json``.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import secrets
from pathlib import Path
from typing import Any

from erpilot.ops import dlq
from erpilot.stack.nats_credentials import PASSWORDS_FILE
from erpilot.stack.nats_security import DEFAULT_INBOX, SERVICES, build_users, password_variable, service_inboxes


class Connections:
    """NATS connections by user, opened on first use and closed together."""

    def __init__(self, nats_url: str, data_dir: Path):
        self.servers = [url.strip() for url in nats_url.split(",")]
        self.data_dir = data_dir
        self.open: dict[str | None, Any] = {}

    def _password(self, user: str) -> str:
        if value := os.environ.get(password_variable(user)):
            return value
        path = self.data_dir / PASSWORDS_FILE
        if path.exists() and (value := json.loads(path.read_text()).get(user)):
            return value
        raise dlq.DeadLetterError(f"publishing this replay needs the NATS user {user!r}: "
                                  f"set {password_variable(user)}")

    async def connect(self, user: str | None, password: str | None = None) -> Any:
        import nats

        if user not in self.open:
            if user is not None and password is None:
                password = self._password(user)
            # What each user may subscribe to, and a random token: its NUID inboxes are not guessed (issue 32).
            inbox = f"{service_inboxes().get(user, DEFAULT_INBOX)}.{secrets.token_hex(16)}"
            self.open[user] = await nats.connect(self.servers, user=user, password=password, inbox_prefix=inbox,
                                                 connect_timeout=5, max_reconnect_attempts=2, name="erpilot-dlq")
        return self.open[user].jetstream()

    async def close(self) -> None:
        for connection in self.open.values():
            await connection.close()

    async def as_user(self, role: str, subject: str) -> Any:
        """Who may publish ``subject``: the dead-lettering service (``record``), a sender (``message``)."""
        if role == "record":
            service = subject.split(".")[3]
            if service not in SERVICES:
                raise dlq.DeadLetterError(f"no NATS user may record a replay on {subject}")
            return await self.connect(service)
        users = build_users()
        senders = [service for service in SERVICES if users[service].may_publish(subject)]
        if not senders:
            raise dlq.DeadLetterError(f"no NATS user may publish {subject}")
        return await self.connect(senders[0])


def _row(letter: dlq.DeadLetter) -> str:
    return (f"{letter.seq:>6}  {letter.time[:19]}  {letter.original_subject}  attempts={letter.attempts or '?'}  "
            f"{'replayed' if letter.replayed else 'not replayed'}  {letter.reason[:120]}")


async def run(args: argparse.Namespace, nats_url: str, data_dir: Path) -> list[str]:
    """The output lines of `erpilot dlq list|show|replay`."""
    connections = Connections(nats_url, data_dir)
    user = os.environ.get("ERPILOT_NATS_USER") or None
    try:
        js = await connections.connect(user, os.environ.get("ERPILOT_NATS_PASSWORD"))
        if args.action == "list":
            letters = await dlq.list_dead_letters(js, service=args.service, limit=args.limit)
            if args.json:
                return [json.dumps([letter.as_json(with_body=False) for letter in letters], indent=2)]
            return [_row(letter) for letter in letters] or ["no dead letters"]
        if args.action == "show":
            return [json.dumps((await dlq.show_dead_letter(js, args.seq)).as_json(), indent=2, ensure_ascii=False)]
        for seq in args.seq:  # every one is checked first: a refused one means none is published
            await dlq.check_replayable(js, await dlq.show_dead_letter(js, seq))
        lines = []
        for seq in args.seq:
            published, letter = await dlq.replay_dead_letter(
                js, seq, by=f"{getpass.getuser()} (erpilot dlq)",
                as_user=connections.as_user if user is not None else None)
            lines.append(f"{seq}: {'replayed' if published else 'already replayed, nothing published'} "
                         f"to {letter.original_subject} (record {letter.replayed['record_seq']})")
        return lines
    finally:
        await connections.close()
