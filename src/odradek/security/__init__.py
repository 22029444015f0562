"""Security: TLS contexts, principals from client certificates, and (with the auth work) listeners and SASL."""
