"""Flux's notations: idsets and hostlists (RFC 22, 29), ranges and jobspecs (RFC 14, 45),
resource shapes (RFC 46), constraints (RFC 31) and requires (RFC 35)."""
