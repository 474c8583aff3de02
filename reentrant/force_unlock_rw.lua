-- Force unlock of Redisson's RReadWriteLock. KEYS[1] lock name, KEYS[2] channel
-- "redisson_rwlock:{name}"; ARGV[1] message, ARGV[2] publish command (empty: publish
-- nothing), ARGV[3] the mode the hash must be in ('read', 'write'; empty: either).
-- Returns 1 when the lock was deleted (and waiters told), else 0; 4 when it was deleted but
-- the ACL refused the message (P1-77). Readers' timeout keys are left to expire, as Redisson
-- leaves them.
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false or (ARGV[3] ~= '' and mode ~= ARGV[3]) then
    return 0
end
local heard = true
if ARGV[2] ~= '' then
    local published = redis.pcall(ARGV[2], KEYS[2], ARGV[1])
    heard = not (type(published) == 'table' and published.err)
end
redis.call('del', KEYS[1])
if heard then
    return 1
end
return 4
