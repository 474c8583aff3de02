-- Redisson RLock release with the unlock latch.
-- KEYS[1] lock name, KEYS[2] channel, KEYS[3] latch key.
-- ARGV[1] unlock message, ARGV[2] lease ms, ARGV[3] holder field,
-- ARGV[4] publish command (PUBLISH or SPUBLISH; empty: publish nothing, as
-- Redisson's spin lock), ARGV[5] latch ttl ms.
-- A partial release never shortens the key's expiry (Redisson's resets it to the lease).
-- Returns the latch's value when this request already ran, nil when the field
-- does not hold the lock, 0 when a hold remains, 1 when the lock was released,
-- 4 when it was released but the ACL refused the unlock message (P1-77: sent
-- with pcall, so that a Client that may not publish can still release; nobody
-- is told, waiters wake when the lease they saw ends).
-- Every command Redis may refuse (a non-integer count, OOM refusing the latch)
-- comes before the first change, so that a refused release changes nothing.
local done = redis.call('get', KEYS[3])
if done ~= false then
    return tonumber(done)
end
local heard = true -- the unlock message was published (or none was to be)
local count = redis.call('hget', KEYS[1], ARGV[3])
if count == false or redis.call('hexists', KEYS[1], 'mode') == 1 then
    -- not held, or a read-write lock's hash: not this lock's hold
    return nil
end
count = tonumber(count)
if count == nil or count ~= math.floor(count) then
    return redis.error_reply('ERR rlock: hold count of the field is not an integer')
end
if count > 1 then
    redis.call('set', KEYS[3], 0, 'px', ARGV[5])
    redis.call('hincrby', KEYS[1], ARGV[3], -1)
    if redis.call('pttl', KEYS[1]) < tonumber(ARGV[2]) then
        redis.call('pexpire', KEYS[1], ARGV[2])
    end
    return 0
end
if ARGV[4] ~= '' then
    local published = redis.pcall(ARGV[4], KEYS[2], ARGV[1])
    if type(published) == 'table' and published.err then
        heard = false -- the ACL refused the message (P1-77): released without it
    end
end
redis.call('set', KEYS[3], 1, 'px', ARGV[5])
redis.call('del', KEYS[1])
if heard then
    return 1
end
return 4
