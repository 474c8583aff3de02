-- Redisson RLock force unlock. KEYS[1] lock name, KEYS[2] channel;
-- ARGV[1] unlock message, ARGV[2] publish command (empty: publish nothing,
-- as Redisson's spin lock).
-- Returns 1 when a lock was deleted (and waiters told), else 0; 4 when it was deleted but
-- the ACL refused the message (published with pcall, as release.lua: P1-77).
if redis.call('del', KEYS[1]) == 1 then
    if ARGV[2] ~= '' then
        local published = redis.pcall(ARGV[2], KEYS[2], ARGV[1])
        if type(published) == 'table' and published.err then
            return 4
        end
    end
    return 1
end
return 0
