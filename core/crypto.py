"""Explicit ciphers for the encrypted columns: key rotation and wrong-key checks; and the
one door every encrypted value is read through.

The field library reads its keys once, when models load. To read with one pair of keys
and write with another (rotation), or to prove that a wrong key fails closed, we build
the same cipher by hand: PBKDF2 over AGENTLOOM_ENCRYPTION_KEY (the library's derivation)
for AES, and the raw SECRET_KEY for the HMAC signature.

Reading: every decrypted plaintext is unpickled by :func:`plaintext_load`, which replaces
lone surrogates (``context.surrogates``). Text now has them replaced where it enters, but
rows written before that rule may hold one, and a single lone surrogate makes every page,
answer and request body that carries it fail to encode: stored data must always render.
The models take ``encrypt`` from here, so the library's field reads through this door
before any model can load a row (:func:`_field_load`).
"""
from __future__ import annotations

import pickle
import threading
from collections import OrderedDict
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.pbkdf2 import PBKDF2HMAC
from django.conf import settings
from django_cryptography.core.signing import FernetSigner, SignatureExpired
from django_cryptography.fields import EncryptedMixin, Expired, encrypt
from django_cryptography.utils.crypto import FernetBytes

from context.surrogates import may_hold_surrogates, replace_lone_surrogates

__all__ = ["ColumnCipher", "DecryptionFailed", "RecentPlaintexts", "derive_key", "encrypt", "plaintext_load"]


def plaintext_load(plain: bytes) -> Any:
    """The value a decrypted plaintext holds, with any lone surrogate replaced by U+FFFD.

    Pickle stores each string as UTF-8 with ``surrogatepass``, so a plaintext with no
    surrogate's three-byte form holds none, and the common read costs a byte scan or two."""
    value = pickle.loads(plain)
    if may_hold_surrogates(plain):
        value = replace_lone_surrogates(value)
    return value


def _field_load(self: Any, value: bytes) -> Any:
    # The library's own ``EncryptedMixin._load`` (django-cryptography-5 2.0), unpickling
    # through ``plaintext_load``: the field has no hook for what it reads.
    try:
        plain = self._fernet.decrypt(value, self.ttl)
    except SignatureExpired:
        return Expired
    return plaintext_load(plain)


EncryptedMixin._load = _field_load  # type: ignore[method-assign]  # the library offers no hook


class DecryptionFailed(Exception):
    """Stored content could not be read with the configured keys. Never returns garbage."""


def derive_key(encryption_key: str) -> bytes:
    salt = settings.CRYPTOGRAPHY_SALT  # type: ignore[misc]  # set at start by django-cryptography's AppConf
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
            return plaintext_load(self._fernet.decrypt(bytes(raw)))
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
        return plaintext_load(plain)

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
