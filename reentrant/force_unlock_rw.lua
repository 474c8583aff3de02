-- Force unlock of Redisson's RReadWriteLock. KEYS[1] lock name, KEYS[2] channel
-- "redisson_rwlock:{name}"; ARGV[1] message, ARGV[2] publish command (empty: publish
-- nothing), ARGV[3] the mode the hash must be in ('read', 'write'; empty: either).
-- Returns 1 when the lock was deleted (and waiters told), else 0. Readers' timeout keys
-- are left to expire, as Redisson leaves them.
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false or (ARGV[3] ~= '' and mode ~= ARGV[3]) then
    return 0
end
if ARGV[2] ~= '' then
    redis.call(ARGV[2], KEYS[2], ARGV[1])
end
redis.call('del', KEYS[1])
return 1
