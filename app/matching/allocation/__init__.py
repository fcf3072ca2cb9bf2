"""Allocation on worker inventories (RFC 14 / RFC 46): the pure allocator and spec, the
inventory rows and coarse filter, bookings, and the scheduler-side multi-node allocation."""
