-- Redisson's fair-lock release with the unlock latch: the plain release, after pruning
-- the queue's timed-out heads, publishing on the channel of the waiter at the queue's
-- head only (KEYS[4] .. ':' .. its field).
-- KEYS[1] lock name, KEYS[2] queue, KEYS[3] timeouts, KEYS[4] the lock's channel,
-- KEYS[5] latch key.
-- ARGV[1] unlock message, ARGV[2] lease ms, ARGV[3] holder field, ARGV[4] publish
-- command, ARGV[5] latch ttl ms, ARGV[6] now (the client's clock, ms), ARGV[7] the wait ms
-- (Redisson's threadWaitTime) of a give-back that keeps its place ('0' or absent: a release).
-- A give-back that keeps its place undoes the grant of its field's last hold: the field heads
-- the queue again, with a timeout of now + the wait, the other waiters' timeouts are raised by
-- the wait the grant lowered them by, and nobody is woken (the field tries again at once;
-- issue 29, stage 4: a fair grant given back because no replica acknowledged it).
-- Returns the latch's value when this request already ran, nil when the field does not
-- hold the lock (the head is still woken when the lock is free, as Redisson's release
-- wakes it), 0 when a hold remains, 1 when the lock was released, 4 when it was released
-- but the ACL refused the message to the head (release.lua, P1-77).
-- A partial release never shortens the key's expiry (Redisson's resets it to the lease).
local done = redis.call('get', KEYS[5])
if done ~= false then
    return tonumber(done)
end
local heard = true -- the unlock message was published (or none was to be)
local count = redis.call('hget', KEYS[1], ARGV[3])
if count ~= false and redis.call('hexists', KEYS[1], 'mode') == 1 then
    -- a read-write lock's hash: not this lock's hold
    return nil
end
if count ~= false then
    count = tonumber(count)
    if count == nil or count ~= math.floor(count) then
        return redis.error_reply('ERR rlock: hold count of the field is not an integer')
    end
    if count > 1 then
        redis.call('set', KEYS[5], 0, 'px', ARGV[5])
        redis.call('hincrby', KEYS[1], ARGV[3], -1)
        if redis.call('pttl', KEYS[1]) < tonumber(ARGV[2]) then
            redis.call('pexpire', KEYS[1], ARGV[2])
        end
        return 0
    end
elseif redis.call('exists', KEYS[1]) == 1 then
    return nil
end
local now = tonumber(ARGV[6])
local head
while true do
    head = redis.call('lindex', KEYS[2], 0)
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
local keep = tonumber(ARGV[7] or '0')
if count ~= false and keep > 0 then
    if redis.call('zscore', KEYS[3], ARGV[3]) == false then
        local waiting = redis.call('zrange', KEYS[3], 0, -1)
        for i = 1, #waiting do
            redis.call('zincrby', KEYS[3], keep, waiting[i])
        end
        redis.call('lpush', KEYS[2], ARGV[3])
        redis.call('zadd', KEYS[3], now + keep, ARGV[3])
    end
    head = false -- this field heads the queue: nobody to wake
end
if head ~= false then
    local published = redis.pcall(ARGV[4], KEYS[4] .. ':' .. head, ARGV[1])
    if type(published) == 'table' and published.err then
        heard = false -- the ACL refused the message (P1-77): released without it
    end
end
if count == false then
    return nil
end
redis.call('set', KEYS[5], 1, 'px', ARGV[5])
redis.call('del', KEYS[1])
if heard then
    return 1
end
return 4
