-- Redisson RLock release with the unlock latch.
-- KEYS[1] lock name, KEYS[2] channel, KEYS[3] latch key.
-- ARGV[1] unlock message, ARGV[2] lease ms, ARGV[3] holder field,
-- ARGV[4] publish command (PUBLISH or SPUBLISH), ARGV[5] latch ttl ms.
-- Returns the latch's value when this request already ran, nil when the field
-- does not hold the lock, 0 when a hold remains, 1 when the lock was released.
local done = redis.call('get', KEYS[3])
if done ~= false then
    return tonumber(done)
end
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
    return nil
end
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if counter > 0 then
    redis.call('pexpire', KEYS[1], ARGV[2])
    redis.call('set', KEYS[3], 0, 'px', ARGV[5])
    return 0
end
redis.call('del', KEYS[1])
redis.call(ARGV[4], KEYS[2], ARGV[1])
redis.call('set', KEYS[3], 1, 'px', ARGV[5])
return 1
