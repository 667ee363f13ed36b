"""Explicit ciphers for the encrypted columns: key rotation and wrong-key checks.

The field library reads its keys once, when models load. To read with one pair of keys
and write with another (rotation), or to prove that a wrong key fails closed, we build
the same cipher by hand: PBKDF2 over AGENTLOOM_ENCRYPTION_KEY (the library's derivation)
for AES, and the raw SECRET_KEY for the HMAC signature.
"""
from __future__ import annotations

import pickle
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
