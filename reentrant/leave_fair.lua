-- A waiter leaves a fair lock's queue (Redisson's acquireFailed): the waiters behind it
-- have their timeouts lowered by its wait, and it leaves the list and the zset. When it
-- was the head and the lock is free, the new head is woken (Redisson's leaves it to its
-- timeout). Idempotent: a second run finds nothing to do.
-- KEYS[1] lock name, KEYS[2] queue, KEYS[3] timeouts, KEYS[4] the lock's channel.
-- ARGV[1] holder field, ARGV[2] the wait ms it joined with, ARGV[3] unlock message,
-- ARGV[4] publish command.
-- Returns 1 when the field was queued, else 0.
local queue = redis.call('lrange', KEYS[2], 0, -1)
local at = 0
for i = 1, #queue do
    if queue[i] == ARGV[1] then
        at = i
        break
    end
end
if at > 0 then
    for i = at + 1, #queue do
        redis.call('zincrby', KEYS[3], -tonumber(ARGV[2]), queue[i])
    end
end
redis.call('zrem', KEYS[3], ARGV[1])
redis.call('lrem', KEYS[2], 0, ARGV[1])
if at == 1 and #queue > 1 and redis.call('exists', KEYS[1]) == 0 then
    -- pcall: an ACL that refuses the message does not undo the leave (P1-77); the new head
    -- then finds the lock at its next attempt
    redis.pcall(ARGV[4], KEYS[4] .. ':' .. queue[2], ARGV[3])
end
if at > 0 then
    return 1
end
return 0
