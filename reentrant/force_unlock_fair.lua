-- Redisson's fair-lock force unlock. KEYS[1] lock name, KEYS[2] queue, KEYS[3] timeouts,
-- KEYS[4] the lock's channel; ARGV[1] unlock message, ARGV[2] publish command,
-- ARGV[3] now (the client's clock, ms).
-- Prunes the queue's timed-out heads; when a lock was deleted, wakes the waiter at the
-- head and returns 1 (4 when the ACL refused that message: P1-77), else returns 0.
local now = tonumber(ARGV[3])
while true do
    local head = redis.call('lindex', KEYS[2], 0)
    if head == false then
        break
    end
    local t = redis.call('zscore', KEYS[3], head)
    if t == false or tonumber(t) > now then
        break
    end
    redis.call('zrem', KEYS[3], head)
    redis.call('lpop', KEYS[2])
end
if redis.call('del', KEYS[1]) == 1 then
    local head = redis.call('lindex', KEYS[2], 0)
    if head ~= false then
        local published = redis.pcall(ARGV[2], KEYS[4] .. ':' .. head, ARGV[1])
        if type(published) == 'table' and published.err then
            return 4
        end
    end
    return 1
end
return 0
