"""How every process of the farm authenticates to its Ray cluster (docs/farm.md).

One token per farm (Ray's token authentication, ``RAY_AUTH_MODE=token``): :class:`FarmAuth` is
how this process does, the token file it reads (``--token-file``, else
``$LATBENCH_FARM_TOKEN_FILE``, else ``~/.latbench/farm_token``) or none at all (``--insecure-no-auth``, else
``$LATBENCH_FARM_INSECURE_NO_AUTH=1``: a head started open, for isolated test networks).
:func:`probe_head` asks the head, before Ray does, whether it takes that token, so a refusal is
one line naming the file instead of Ray's retries.
"""
from __future__ import annotations

import os
import re
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import MutableMapping

from foundation import limits

TOKEN_FILE_ENV = "LATBENCH_FARM_TOKEN_FILE"
INSECURE_ENV = "LATBENCH_FARM_INSECURE_NO_AUTH"
DEFAULT_TOKEN_FILE = "~/.latbench/farm_token"
TOKEN_FILE_BYTES = limits.TOKEN_FILE_BYTES
_TOKEN = re.compile(r"[\x21-\x7e]{32,1024}")  # printable ASCII without blanks, as a gRPC header value must be
# the first request of every Ray driver to the head (an empty request message): it needs the token
_HEAD_PROBE = "/ray.rpc.NodeInfoGcsService/GetClusterId"


@dataclass(frozen=True)
class FarmAuth:
    """How this process authenticates to the farm: with the token in ``token_file``, or not at
    all (``None``: a head started with ``--insecure-no-auth``)."""

    token_file: Path | None

    @property
    def insecure(self) -> bool:
        return self.token_file is None

    def ray_env(self) -> dict[str, str]:
        """What Ray reads from the environment, here and in every Ray process started from here:
        the mode and the token's file (never the token itself), and usage reporting off."""
        env = {"RAY_AUTH_MODE": "disabled" if self.insecure else "token", "RAY_USAGE_STATS_ENABLED": "0"}
        if not self.insecure:
            env["RAY_AUTH_TOKEN_PATH"] = str(self.token_file)
        return env

    def apply_env(self, environ: MutableMapping[str, str]) -> MutableMapping[str, str]:
        """Sets :meth:`ray_env` in ``environ``; ``RAY_AUTH_TOKEN`` goes (Ray prefers it to the file)."""
        for key in ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
            environ.pop(key, None)
        environ.update(self.ray_env())
        return environ

    def describe(self) -> str:
        return "no authentication (--insecure-no-auth)" if self.insecure else f"token file {self.token_file}"


def token_path(option: str | os.PathLike[str] | None = None) -> Path:
    """The token file: ``option`` (``--token-file``), else ``$LATBENCH_FARM_TOKEN_FILE``, else
    ``~/.latbench/farm_token``."""
    return Path(option or os.environ.get(TOKEN_FILE_ENV) or DEFAULT_TOKEN_FILE).expanduser().absolute()


def farm_auth(token_file: str | os.PathLike[str] | None = None, insecure: bool = False) -> FarmAuth:
    """This process's :class:`FarmAuth`: its options first, then the environment (module doc)."""
    if insecure and token_file:
        raise ValueError("--token-file and --insecure-no-auth: give one of them")
    flag = os.environ.get(INSECURE_ENV, "")
    if flag not in ("", "0", "1"):
        raise ValueError(f"{INSECURE_ENV}={flag!r}: expected 1 (no authentication) or 0")
    if insecure or (not token_file and flag == "1"):
        return FarmAuth(None)
    return FarmAuth(token_path(token_file))


def read_token(path: Path) -> str:
    """The token in ``path``: a regular file no one else may read or write, holding one token."""
    hint = f"copy the farm head's token file here, or name it with --token-file or {TOKEN_FILE_ENV}"
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise ValueError(f"token file {path}: not found ({hint}; docs/farm.md)") from None
    except OSError as e:
        raise ValueError(f"token file {path}: {e.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"token file {path}: not a regular file ({hint})")
    if st.st_mode & 0o077:
        raise ValueError(f"token file {path}: other users may read it (mode {stat.S_IMODE(st.st_mode):04o}): "
                         f"chmod 600 {path}")
    if st.st_size > TOKEN_FILE_BYTES:
        raise ValueError(f"token file {path}: {st.st_size} bytes, a token file holds one line "
                         f"(at most {TOKEN_FILE_BYTES} bytes)")
    with open(path, "rb") as f:
        token = f.read(TOKEN_FILE_BYTES).decode("ascii", "replace").strip()  # Ray strips blanks too
    if not _TOKEN.fullmatch(token):
        raise ValueError(f"token file {path}: expected one token of 32 to 1024 printable characters without "
                         f"blanks (`latbench farm join --head` writes one)")
    return token


def ensure_token(path: Path) -> bool:
    """The head's token file: checked if it exists, else made (64 random hex digits, mode 0600; a
    folder made for it is 0700). Returns whether it was made."""
    if path.exists() or path.is_symlink():
        read_token(path)
        return False
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # never readable by others, not even briefly
    try:
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.link(tmp, path)  # complete or absent; a head started at the same moment keeps its own
    except FileExistsError:
        read_token(path)
        return False
    finally:
        tmp.unlink(missing_ok=True)
    return True


def probe_head(address: str, auth: FarmAuth, timeout: float = 10.0) -> None:
    """Asks the head at ``address`` whether it takes ``auth``, before Ray does (Ray retries a
    refused token for 20 s, then says only that it cannot connect). Raises ValueError, one line:
    the token file missing or refused, a head that authenticates while ``auth`` is insecure or
    one that does not while ``auth`` has a token (Ray needs one mode on every node and driver),
    or no head at ``address``."""
    import grpc

    token = None if auth.insecure else read_token(auth.token_file)

    def ask(tok: str | None):
        with _channel(grpc, address) as channel:
            call = channel.unary_unary(_HEAD_PROBE, request_serializer=bytes, response_deserializer=bytes)
            try:
                call(b"", timeout=timeout, metadata=(("authorization", f"Bearer {tok}"),) if tok else None)
            except grpc.RpcError as e:
                return e.code(), " ".join(str(e.details()).split())[:200]
            return grpc.StatusCode.OK, ""

    code, why = ask(None)
    if code == grpc.StatusCode.OK:
        if not auth.insecure:
            raise ValueError(f"farm {address}: the head does not authenticate (it was started with "
                             f"--insecure-no-auth): join it only on an isolated network, with --insecure-no-auth "
                             f"or {INSECURE_ENV}=1")
        return
    if code == grpc.StatusCode.UNAUTHENTICATED:
        if auth.insecure:
            raise ValueError(f"farm {address}: the head requires a token: drop --insecure-no-auth ({INSECURE_ENV}) "
                             f"and give its token file (--token-file or {TOKEN_FILE_ENV})")
        code, why = ask(token)
        if code == grpc.StatusCode.UNAUTHENTICATED:
            raise ValueError(f"farm {address}: the head refuses the token in {auth.token_file} (another farm's "
                             f"token? copy the head's token file here)")
        if code == grpc.StatusCode.OK:
            return
    raise ValueError(f"farm {address}: no Ray head answers there ({code.name.lower()}: {why})")


def _channel(grpc, address: str):
    """A channel to the head as Ray opens one: with TLS when ``RAY_USE_TLS`` says so (its
    certificates from ``RAY_TLS_SERVER_CERT``, ``RAY_TLS_SERVER_KEY``, ``RAY_TLS_CA_CERT``)."""
    if os.environ.get("RAY_USE_TLS", "0").lower() not in ("1", "true"):
        return grpc.insecure_channel(address)
    from ray._common.tls_utils import load_certs_from_env

    try:
        cert, key, ca = load_certs_from_env()
    except (RuntimeError, OSError) as e:
        raise ValueError(f"RAY_USE_TLS: {' '.join(str(e).split())}") from None
    return grpc.secure_channel(address, grpc.ssl_channel_credentials(root_certificates=ca, private_key=key,
                                                                     certificate_chain=cert))
