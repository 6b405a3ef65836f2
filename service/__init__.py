"""lorentztron service: live models over HTTP."""
