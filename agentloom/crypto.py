"""Explicit ciphers for the encrypted columns: key rotation and wrong-key checks.

The field library reads its keys once, when models load. To read with one pair of keys
and write with another (rotation), or to prove that a wrong key fails closed, we build
the same cipher by hand: PBKDF2 over AGENTLOOM_ENCRYPTION_KEY (the library's derivation)
for AES, and the raw SECRET_KEY for the HMAC signature.
"""
from __future__ import annotations

import pickle
import threading
from collections import OrderedDict
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.pbkdf2 import PBKDF2HMAC
from django.conf import settings
from django_cryptography.core.signing import FernetSigner
from django_cryptography.utils.crypto import FernetBytes


class DecryptionFailed(Exception):
    """Stored content could not be read with the configured keys. Never returns garbage."""


def derive_key(encryption_key: str) -> bytes:
    salt = settings.CRYPTOGRAPHY_SALT
    kdf = PBKDF2HMAC(algorithm=hashes.SHA256(), length=32, salt=salt, iterations=30000)
    return kdf.derive(encryption_key.encode())


class ColumnCipher:
    """Encrypts and decrypts values exactly as the encrypted model fields store them."""

    def __init__(self, *, secret_key: str, encryption_key: str) -> None:
        self._fernet = FernetBytes(derive_key(encryption_key), signer=FernetSigner(key=secret_key))

    def dump(self, value: Any) -> bytes:
        return self._fernet.encrypt(pickle.dumps(value))

    def load(self, raw: bytes) -> Any:
        try:
            return pickle.loads(self._fernet.decrypt(bytes(raw)))
        except Exception as exc:  # bad signature, bad padding, bad pickle: all mean "not ours"
            raise DecryptionFailed("stored content cannot be decrypted with these keys") from exc


class RecentPlaintexts:
    """What an encrypted column's stored bytes decrypt to, for the values read most
    recently, up to ``max_bytes`` of tokens and plaintexts together.

    A run reads its whole context at its first step, so each question decrypted again
    every record its session's earlier questions had (issue #29: a twentieth of a worker's
    CPU at 50 users, growing with the session). Keyed by the stored token itself: each
    encryption has its own random IV, so the same bytes are the same value, and a changed
    or rotated value is a different key, never a stale hit. A miss decrypts through the
    field's own cipher, signature checked; every read gets a fresh object (pickle), so no
    caller can change what another reads.
    """

    def __init__(self, *, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.size = 0
        self._items: OrderedDict[bytes, bytes] = OrderedDict()
        self._lock = threading.Lock()

    def load(self, field: Any, raw: Any) -> Any:
        token = bytes(raw)
        with self._lock:
            plain = self._items.get(token)
            if plain is not None:
                self._items.move_to_end(token)
        if plain is None:
            plain = field._fernet.decrypt(token, field.ttl)
            self._keep(token, plain)
        return pickle.loads(plain)

    def _keep(self, token: bytes, plain: bytes) -> None:
        cost = len(token) + len(plain)
        if cost > self.max_bytes // 8:  # one large value would push out many small ones
            return
        with self._lock:
            if token in self._items:
                return
            self._items[token] = plain
            self.size += cost
            while self.size > self.max_bytes:
                old, old_plain = self._items.popitem(last=False)
                self.size -= len(old) + len(old_plain)
