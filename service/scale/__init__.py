"""Scale-out over Redis: the roles (learners with leases and fencing, api replicas), delta
publication, the Redis client and the one Redis key layout."""
