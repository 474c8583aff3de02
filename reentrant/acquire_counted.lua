-- rlock's acquire: Redisson's RLock (and RFencedLock) layout, answered per request.
-- KEYS[1] lock name, KEYS[2] the request's record (an unlock-latch key of the request id),
-- KEYS[3] the fencing counter (read only when ARGV[4] is '1').
-- ARGV[1] lease ms, ARGV[2] holder field, ARGV[3] the holds the client knows the field has,
-- ARGV[4] '1' to take a fencing token.
-- Returns the token alone (0 unless fenced) when the lock was free, the client knew no hold of
-- the field, and the request had no record: acquired, the field's first hold (the common case,
-- in three commands, as Redisson's; no table to build). Otherwise {status, value, token}:
--   {1, count, token} acquired: the field now has count holds (this request ran, now or before);
--   {0, pttl, 0}      another field holds the lock (pttl -1: the key has no expiry);
--   {2, count, 0}     the field has fewer holds than the client knows: some were lost;
--   {3, 0, 0}         the request was cancelled (its record exists): nothing changed.
-- A re-entry never shortens the key's expiry. A hash with a 'mode' field is a read-write
-- lock: busy, and none of its fields is counted as this lock's hold.
local known = tonumber(ARGV[3])
local lease = tonumber(ARGV[1])
-- How many of the lock's key and the request's record exist, asked once
-- when the client knows no hold of the field (-1: not asked).
local present = -1
if known == 0 then
    present = redis.call('exists', KEYS[1], KEYS[2])
    if present == 0 then
        -- free, and this request was neither cancelled nor run before
        local token = 0
        if ARGV[4] == '1' then
            token = redis.call('incr', KEYS[3])
        end
        redis.call('hincrby', KEYS[1], ARGV[2], 1)
        redis.call('pexpire', KEYS[1], lease)
        return token
    end
end
-- The key's expiry, read once: -2 when the lock is free (then the field
-- has no holds), -1 when it has none. Nothing below changes it before it
-- is used.
local ttl = redis.call('pttl', KEYS[1])
-- The record: what present counts beyond the lock's key, or asked.
local recorded
if present > 0 then
    local key = 1
    if ttl == -2 then
        key = 0
    end
    recorded = present - key == 1
else
    recorded = redis.call('exists', KEYS[2]) == 1
end
if recorded then
    return {3, 0, 0}
end
local count = 0
if ttl ~= -2 then
    count = tonumber(redis.call('hget', KEYS[1], ARGV[2]) or '0')
    if count == nil then
        return redis.error_reply('ERR rlock: hold count of the field is not an integer')
    end
    if redis.call('hexists', KEYS[1], 'mode') == 1 then
        -- a read-write lock: another layout, whose fields are not this lock's holds
        return {0, ttl, 0}
    end
end
if count == known + 1 then
    -- this request ran before and its reply was lost
    if ttl < lease then
        redis.call('pexpire', KEYS[1], lease)
    end
    local token = 0
    if ARGV[4] == '1' then
        token = tonumber(redis.call('get', KEYS[3]) or '0')
    end
    return {1, count, token}
end
if count < known then
    return {2, count, 0}
end
if count > 0 or ttl == -2 then
    local token = 0
    if ARGV[4] == '1' then
        token = redis.call('incr', KEYS[3])
    end
    count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    if ttl < lease then
        redis.call('pexpire', KEYS[1], lease)
    end
    return {1, count, token}
end
return {0, ttl, 0}
