"""What-if over the live cluster (issue 24): a change set applied by the real services in a
savepoint that is rolled back, and what it would change in who can run what."""
