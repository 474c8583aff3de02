-- rlock's read acquire: the read half of Redisson's RReadWriteLock, answered per request.
-- KEYS[1] lock name (a hash: 'mode' = 'read' or 'write', then the holder fields),
-- KEYS[2] the request's record (an unlock-latch key of the request id),
-- KEYS[3] the reader's timeout-key prefix "{name}:<field>:rwlock_timeout".
-- ARGV[1] lease ms, ARGV[2] reader field "<client id>:<owner>", ARGV[3] the holds the client
-- knows the field has, ARGV[4] the same owner's writer field ("<field>:write").
-- Returns {status, value, 0} as acquire_counted.lua does: 1 acquired (value: the field's
-- holds), 0 busy (value: the hash's pttl), 2 fewer holds than known, 3 cancelled.
-- Hold n of the field has the key KEYS[3]..':'..n = 1 expiring with that hold's lease; the
-- hash lives at least as long as the lease. A hash without 'mode' is another kind of lock:
-- busy, never turned into a read-write lock.
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
    local hold = KEYS[3] .. ':' .. count
    if redis.call('pttl', hold) < lease then
        redis.call('set', hold, 1, 'px', lease)
    end
    if redis.call('pttl', KEYS[1]) < lease then
        redis.call('pexpire', KEYS[1], lease)
    end
    return {1, count, 0}
end
if count < known then
    return {2, count, 0}
end
if mode == false and redis.call('exists', KEYS[1]) == 0 then
    redis.call('hset', KEYS[1], 'mode', 'read')
    mode = 'read'
end
if mode == 'read' or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[4]) == 1) then
    count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('set', KEYS[3] .. ':' .. count, 1, 'px', lease)
    if redis.call('pttl', KEYS[1]) < lease then
        redis.call('pexpire', KEYS[1], lease)
    end
    return {1, count, 0}
end
return {0, redis.call('pttl', KEYS[1]), 0}
