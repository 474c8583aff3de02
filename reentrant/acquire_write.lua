-- rlock's write acquire: the write half of Redisson's RReadWriteLock, answered per request.
-- KEYS[1] lock name, KEYS[2] the request's record (an unlock-latch key of the request id).
-- ARGV[1] lease ms, ARGV[2] writer field "<client id>:<owner>:write", ARGV[3] the holds the
-- client knows the field has.
-- Returns {status, value, 0} as acquire_counted.lua does. Only a free name is taken ('mode'
-- set to 'write'); a reader, this owner's own included, keeps the writer out. A re-entry
-- sets the expiry to max(PTTL, lease), as every kind's does (Redisson's adds the lease).
if redis.call('exists', KEYS[2]) == 1 then
    return {3, 0, 0}
end
local known = tonumber(ARGV[3])
local lease = tonumber(ARGV[1])
local count = tonumber(redis.call('hget', KEYS[1], ARGV[2]) or '0')
if count == nil then
    return redis.error_reply('ERR rlock: hold count of the field is not an integer')
end
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false and count > 0 then
    -- a hash without 'mode' is another kind of lock: its fields are not this lock's holds
    return {0, redis.call('pttl', KEYS[1]), 0}
end
if count == known + 1 then
    -- this request ran before and its reply was lost
    if redis.call('pttl', KEYS[1]) < lease then
        redis.call('pexpire', KEYS[1], lease)
    end
    return {1, count, 0}
end
if count < known then
    return {2, count, 0}
end
if mode == false and redis.call('exists', KEYS[1]) == 0 then
    redis.call('hset', KEYS[1], 'mode', 'write', ARGV[2], 1)
    redis.call('pexpire', KEYS[1], lease)
    return {1, 1, 0}
end
if mode == 'write' and count > 0 then
    count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    -- max(PTTL, lease), as every kind's re-entry: Redisson's writer adds
    -- a lease to the time left, which keeps a dead writer's key for k+1
    -- leases after k re-entries (safety-3 R3-11). Redisson's own writes
    -- keep their rule; this script is rlock's.
    local left = redis.call('pttl', KEYS[1])
    redis.call('pexpire', KEYS[1], math.max(left, lease))
    return {1, count, 0}
end
return {0, redis.call('pttl', KEYS[1]), 0}
