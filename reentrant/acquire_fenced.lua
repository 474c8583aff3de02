-- Redisson RFencedLock acquire. KEYS[1] lock name, KEYS[2] token counter;
-- ARGV[1] lease ms, ARGV[2] holder field.
-- Returns {-1, token} when acquired (re-entry also takes a new token), else {pttl, -1}.
if (redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
    local token = redis.call('incr', KEYS[2])
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {-1, token}
end
return {redis.call('pttl', KEYS[1]), -1}
