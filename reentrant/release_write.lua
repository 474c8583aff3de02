-- rlock's write release with the unlock latch: the write half of Redisson's RReadWriteLock.
-- KEYS[1] lock name, KEYS[2] channel "redisson_rwlock:{name}", KEYS[3] latch key.
-- ARGV[1] unlock message ('1': wake all), ARGV[2] lease ms, ARGV[3] writer field,
-- ARGV[4] publish command (empty: publish nothing), ARGV[5] latch ttl ms.
-- Returns the latch's value when this request already ran, nil when the field does not
-- hold the lock, 0 when a write hold remains, 1 when the last one went (4 when the ACL
-- refused the unlock message, release.lua, P1-77): the hash is deleted,
-- or, when this owner still holds reads, 'mode' becomes 'read'. Both publish '1' (Redisson's
-- publishes nothing when reads remain, leaving readers waiting until their timeout; the
-- extra message only makes waiters try again). A partial release never shortens the key's
-- expiry (Redisson's resets it to the lease). Every command Redis may refuse comes first.
local done = redis.call('get', KEYS[3])
if done ~= false then
    return tonumber(done)
end
local heard = true -- the unlock message was published (or none was to be)
local count = redis.call('hget', KEYS[1], ARGV[3])
if count == false then
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
if redis.call('hlen', KEYS[1]) <= 2 then
    redis.call('del', KEYS[1])
else
    redis.call('hdel', KEYS[1], ARGV[3])
    redis.call('hset', KEYS[1], 'mode', 'read')
end
if heard then
    return 1
end
return 4
