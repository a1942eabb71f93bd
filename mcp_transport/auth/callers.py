"""Who a call is, for every limit and record that counts callers: the ``Caller``, made once when
the call begins (running/pipeline.py: ``begin``) and read as ``call.caller`` by the quotas, the
rate limits, the shares of threads and workers, the calls log and the audit trail.
"""
from dataclasses import dataclass
from typing import Callable, Union

from ..state.quotas import caller_key


@dataclass(frozen=True, slots=True)
class Caller:
    """The caller of one request: its principal when authorization is on, else its client address
    (TRUSTED_PROXIES honoured)."""

    #: The principal's key (``user:<pk>``, ``client:<id>``), "" without one.
    principal_key: str
    #: The client address, asked only when there is no principal ("" for stdio).
    address: str
    #: What every per-caller limit counts (quotas.caller_key: hashed, of bounded length); ""
    #: for a caller with neither principal nor address (stdio without a user): not limited.
    key: str

    @classmethod
    def of(cls, principal, address: Union[str, Callable[[], str]] = "") -> "Caller":
        """The caller of ``principal`` (an auth.Principal or None), else of ``address`` (or of
        what a function of no arguments says it is: the address is only worked out when needed)."""
        principal_key = principal.key if principal is not None else ""
        if principal_key:
            return cls(principal_key, "", caller_key(principal_key, ""))
        address = address() if callable(address) else address
        return cls("", address, caller_key("", address) if address else "")

    @property
    def label(self) -> str:
        """How the admin and the logs name it."""
        return self.principal_key or (f"address {self.address}" if self.address else "local")


#: The caller of work nobody outside started (a process's own), limited by nothing.
NOBODY = Caller("", "", "")

