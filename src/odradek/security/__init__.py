"""Security: who a client is (authentication) and what it may do (authorization)."""
